//! Every check of the command line that needs neither the model nor the input text, in one
//! place (app layer): flags that belong to the other mode, outputs that cannot be written or
//! that collide, and the corpus mode's input and output folder. [`check_args`] runs before
//! anything is loaded, read or written, so a mistake costs no model load and leaves no file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::attention::HeadSel;
use crate::cli::{Args, PerSentence};
use crate::output::{Destination, Identity};
use crate::render::image::FigureSpec;

/// Name of the JSON export in a report folder.
pub const REPORT_JSON: &str = "attention.json";
/// Name of the HTML report in a report folder.
pub const REPORT_HTML: &str = "report.html";

/// Every file a report folder (`--report DIR`) holds.
pub fn report_files() -> Vec<String> {
    let mut names = vec![REPORT_JSON.to_string(), REPORT_HTML.to_string()];
    for (stem, _) in FigureSpec::all(0, HeadSel::Mean, Some(&[][..])) {
        names.extend([format!("{stem}.png"), format!("{stem}.svg")]);
    }
    names
}

/// Check `args` as described in the module docs; the error is one line that says what to do.
pub fn check_args(args: &Args) -> Result<(), String> {
    if args.threads == Some(0) {
        return Err("--threads must be at least 1".into());
    }
    if args.input.is_some() {
        check_corpus(args)
    } else {
        check_single(args)
    }
}

/// A single input (TEXT): no corpus-only flags, and outputs that can be written, each to its
/// own place.
fn check_single(args: &Args) -> Result<(), String> {
    let corpus_only = [
        ("--out-dir", args.out_dir.is_some()),
        ("--on-bad-line", args.on_bad_line.is_some()),
        ("--per-sentence", args.per_sentence.is_some()),
        ("--force", args.force),
    ];
    if let Some((flag, _)) = corpus_only.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{flag} only applies to corpus mode; add --input FILE (one sentence per line), or \
             drop {flag}"
        ));
    }
    if !args.json_include.is_empty() && args.json.is_none() && args.report.is_none() {
        return Err(
            "--json-include adds sections to the JSON export; add --json FILE or --report DIR"
                .into(),
        );
    }
    check_outputs(args)
}

/// Corpus mode (`--input FILE --out-dir DIR`): no single-input flags; an input that is a file
/// (or `-`); an output folder that is a folder and holds no earlier run unless `--force`.
fn check_corpus(args: &Args) -> Result<(), String> {
    let single = [
        ("--json", args.json.is_some()),
        ("--png", args.png.is_some()),
        ("--svg", args.svg.is_some()),
        ("--html", args.html.is_some()),
        ("--report", args.report.is_some()),
        ("--neuron", args.neuron),
    ];
    if let Some((flag, _)) = single.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{flag} is for a single input; with --input, per-sentence outputs go into --out-dir \
             (choose them with --per-sentence)"
        ));
    }
    let Some(out_dir) = &args.out_dir else {
        return Err("--input needs --out-dir DIR for its outputs".into());
    };
    if !args.json_include.is_empty()
        && args.per_sentence.as_deref() == Some(&[PerSentence::None][..])
    {
        return Err(
            "--json-include adds sections to the per-sentence JSON files, but --per-sentence \
             none writes none; drop one of them"
                .into(),
        );
    }
    let input = args.input.as_deref().unwrap_or(Path::new("-"));
    if input != Path::new("-") && input.is_dir() {
        return Err(format!(
            "--input {} is a folder; give a file with one sentence (or a tab-separated pair) \
             per line",
            input.display()
        ));
    }
    if out_dir.exists() && !out_dir.is_dir() {
        return Err(format!(
            "--out-dir {} is a file; give a folder (it is created if missing)",
            out_dir.display()
        ));
    }
    let earlier = crate::corpus::earlier_run_files(out_dir);
    if earlier > 0 && !args.force {
        return Err(format!(
            "{} already holds {earlier} file{} from an earlier run, and mixing two runs would \
             mislead; give another --out-dir, or add --force to replace them",
            out_dir.join(crate::corpus::SENTENCES_DIR).display(),
            if earlier == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}

/// Every output file the arguments name (`-` included), with its flag. A report folder
/// contributes each file it will hold.
fn output_paths(args: &Args) -> Vec<(&'static str, PathBuf)> {
    let mut out: Vec<(&'static str, PathBuf)> = [
        ("--json", &args.json),
        ("--png", &args.png),
        ("--svg", &args.svg),
        ("--html", &args.html),
    ]
    .into_iter()
    .filter_map(|(flag, p)| p.clone().map(|p| (flag, p)))
    .collect();
    if let Some(dir) = &args.report {
        out.extend(
            report_files()
                .into_iter()
                .map(|f| ("--report", dir.join(f))),
        );
    }
    out
}

/// Outputs that can be written, and no two of them to one place: at most one to standard
/// output (`-`, `/dev/stdout`), no two to one file however spelled (`x`, `./x`, a link to it).
/// Devices such as `/dev/null` may take several.
fn check_outputs(args: &Args) -> Result<(), String> {
    if let Some(dir) = &args.report {
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "--report {}: that is a file; give a folder (it is created if missing)",
                dir.display()
            ));
        }
    }
    let mut outputs = Vec::new();
    for (flag, path) in output_paths(args) {
        let dest = Destination::of(&path).map_err(|e| {
            let reason = match e.source.kind() {
                std::io::ErrorKind::NotFound => "a folder on the way does not exist".to_string(),
                _ => e.source.to_string(),
            };
            format!("{flag} {}: {reason}", path.display())
        })?;
        outputs.push((flag, path, dest));
    }
    let mut seen: HashMap<Identity, (&'static str, &Path)> = HashMap::new();
    for (flag, path, dest) in &outputs {
        let Some(id) = dest.identity() else { continue };
        if let Some((other, other_path)) = seen.get(&id) {
            if id == Identity::Stdout {
                return Err(format!(
                    "{other} and {flag} both write to standard output ({} and {}); only one \
                     output can",
                    other_path.display(),
                    path.display()
                ));
            }
            let both = if other == flag {
                format!("{flag} twice")
            } else {
                format!("{other} and {flag}")
            };
            let file = match &id {
                Identity::File(p) => p.display().to_string(),
                _ => path.display().to_string(),
            };
            return Err(format!(
                "{both} would both write {file} ({} and {}); give each output its own file",
                other_path.display(),
                path.display()
            ));
        }
        seen.insert(id, (flag, path));
    }
    for (flag, path, dest) in &outputs {
        let Destination::File { target } = dest else {
            continue;
        };
        // A report folder is created; the folder of any other file must exist.
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| *flag != "--report" && !d.is_dir()) {
            return Err(format!(
                "{flag} {}: folder {} does not exist; create it first",
                path.display(),
                dir.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn check(argv: &[&str]) -> Result<(), String> {
        let args = Args::try_parse_from(std::iter::once("attnviz").chain(argv.iter().copied()))
            .expect("parses");
        check_args(&args)
    }

    #[test]
    fn corpus_flags_without_input_get_one_line_each() {
        for flag in [
            &["--out-dir", "x"][..],
            &["--on-bad-line", "stop"],
            &["--per-sentence", "none"],
            &["--force"],
        ] {
            let mut argv = vec!["text"];
            argv.extend_from_slice(flag);
            let e = check(&argv).unwrap_err();
            assert!(
                e.starts_with(&format!("{} only applies to corpus mode", flag[0])),
                "{e}"
            );
            assert!(e.contains("--input FILE") && !e.contains('\n'), "{e}");
        }
        let e = check(&["text", "--json-include", "means"]).unwrap_err();
        assert!(e.contains("--json FILE"), "{e}");
        let e = check(&["text", "--threads", "0"]).unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
    }

    #[test]
    fn two_outputs_on_one_file_are_refused_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let same = format!("{d}/same.json");
        let dotted = format!("{d}/./same.json");
        let e = check(&["t", "--json", &same, "--html", &dotted]).unwrap_err();
        assert!(e.starts_with("--json and --html would both write"), "{e}");
        // A link to the file is the same file.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("same.json", dir.path().join("link")).unwrap();
            let link = format!("{d}/link");
            let e = check(&["t", "--png", &same, "--svg", &link]).unwrap_err();
            assert!(e.contains("--png and --svg"), "{e}");
        }
        // A report folder's files count.
        let report = format!("{d}/rep");
        let inside = format!("{d}/rep/report.html");
        let e = check(&["t", "--report", &report, "--html", &inside]).unwrap_err();
        assert!(e.contains("--html and --report"), "{e}");
        // Standard output once, under any name.
        let e = check(&["t", "--json", "-", "--html", "-"]).unwrap_err();
        assert!(e.contains("standard output"), "{e}");
        // Different files are fine.
        let other = format!("{d}/other.html");
        check(&["t", "--json", &same, "--html", &other, "--report", &report]).unwrap();
    }

    #[test]
    fn report_files_match_what_a_report_writes() {
        let files = report_files();
        for name in ["attention.json", "report.html", "head.png", "rollout.svg"] {
            assert!(files.iter().any(|f| f == name), "{name} in {files:?}");
        }
    }
}
