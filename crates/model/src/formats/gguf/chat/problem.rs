//! Why a chat template failed, as facts: minijinja's own message where minijinja failed, and
//! our bound where one of ours stopped it.

/// A chat template that failed to compile or render: one line naming where it came from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: the chat template {problem}")]
pub struct ChatError {
    /// Where the template came from (a file and key).
    pub origin: String,
    /// What failed.
    pub problem: ChatProblem,
}

/// What failed in a chat template (displays after `the chat template `).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChatProblem {
    /// minijinja cannot compile it.
    #[error("does not compile: {cause}")]
    Compile {
        /// minijinja's own message, on one line (the external cause).
        cause: String,
    },
    /// minijinja stopped the render: an error in the template, a `raise_exception`, or one of
    /// the bounds our filters and functions set inside minijinja.
    #[error("failed to render: {cause}")]
    Render {
        /// minijinja's own message, on one line (the external cause).
        cause: String,
    },
    /// The thread the render ran on ended without a result.
    #[error("failed to render: its renderer stopped unexpectedly")]
    RendererStopped,
    /// No thread could be started to render on.
    #[error("could not be rendered: no thread to render it on ({cause})")]
    NoThread {
        /// The system's message (the external cause).
        cause: String,
    },
    /// The prompt would be longer than a render of its messages may write (1 MiB plus twice
    /// the messages).
    #[error("failed to render: it writes more than {limit} bytes, far more than a prompt of this length needs; the template is broken or hostile")]
    TooLong {
        /// The most bytes it may write.
        limit: usize,
    },
    /// The render used up its fuel: minijinja's bound on its work and memory, which grows with
    /// the messages.
    #[error("failed to render: it takes more work or memory than a chat template needs (it ran out of its fuel of {fuel} steps); the template is broken or hostile")]
    OutOfFuel {
        /// The fuel it had.
        fuel: u64,
    },
    /// The prompt is not UTF-8.
    #[error("failed to render: its output is not UTF-8")]
    NotUtf8,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each problem shows the sentence `ChatError` carried before it was typed (the old
    /// format string is quoted above each).
    #[test]
    fn problems_read_as_the_sentences_they_replace() {
        let error = |problem| {
            ChatError {
                origin: "m.gguf (tokenizer.chat_template)".into(),
                problem,
            }
            .to_string()
        };
        let cases = [
            // format!("does not compile: {}", one_line(&e))
            (
                ChatProblem::Compile {
                    cause: "syntax error: unexpected end of input".into(),
                },
                "m.gguf (tokenizer.chat_template): the chat template does not compile: syntax \
                 error: unexpected end of input",
            ),
            // format!("failed to render: {}", one_line(e))
            (
                ChatProblem::Render {
                    cause: "invalid operation: raised an exception: no".into(),
                },
                "m.gguf (tokenizer.chat_template): the chat template failed to render: invalid \
                 operation: raised an exception: no",
            ),
            // "failed to render: its renderer stopped unexpectedly"
            (
                ChatProblem::RendererStopped,
                "m.gguf (tokenizer.chat_template): the chat template failed to render: its \
                 renderer stopped unexpectedly",
            ),
            // format!("could not be rendered: no thread to render it on ({e})")
            (
                ChatProblem::NoThread {
                    cause: "Resource temporarily unavailable (os error 11)".into(),
                },
                "m.gguf (tokenizer.chat_template): the chat template could not be rendered: no \
                 thread to render it on (Resource temporarily unavailable (os error 11))",
            ),
            // format!("failed to render: it writes more than {limit} bytes, far more than a
            //          prompt of this length needs; the template is broken or hostile")
            (
                ChatProblem::TooLong { limit: 1048576 },
                "m.gguf (tokenizer.chat_template): the chat template failed to render: it writes \
                 more than 1048576 bytes, far more than a prompt of this length needs; the \
                 template is broken or hostile",
            ),
            // format!("failed to render: it takes more work or memory than a chat template
            //          needs (it ran out of its fuel of {fuel} steps); the template is broken
            //          or hostile")
            (
                ChatProblem::OutOfFuel { fuel: 101000 },
                "m.gguf (tokenizer.chat_template): the chat template failed to render: it takes \
                 more work or memory than a chat template needs (it ran out of its fuel of \
                 101000 steps); the template is broken or hostile",
            ),
            // "failed to render: its output is not UTF-8"
            (
                ChatProblem::NotUtf8,
                "m.gguf (tokenizer.chat_template): the chat template failed to render: its \
                 output is not UTF-8",
            ),
        ];
        for (problem, old) in cases {
            assert_eq!(error(problem.clone()), old, "{problem:?}");
        }
    }
}
