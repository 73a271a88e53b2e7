//! Who may talk to the server: the Host and Origin checks (DNS rebinding, cross-site requests)
//! and, off loopback, the token every URL carries. Pure functions of the request's headers and
//! query, so they are unit-tested without a socket.

use std::net::{IpAddr, SocketAddr};

use subtle::ConstantTimeEq;

/// What a request must show to be served.
#[derive(Clone, Debug)]
pub struct Guard {
    /// The `Host` values accepted (`127.0.0.1:8750`, `localhost:8750`); empty: any (a wildcard
    /// address, where the token is the guard).
    hosts: Vec<String>,
    /// The token every request must carry; `None` on loopback.
    token: Option<String>,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No or another `Host` than the served address.
    Host,
    /// An `Origin` that is not the served address.
    Origin,
    /// No token, or a wrong one.
    Token,
}

impl Refusal {
    /// The one line the client is told.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Host => "the Host header is not this server's address",
            Refusal::Origin => "the request comes from another site (Origin)",
            Refusal::Token => "the token is missing or wrong: open the URL the server printed",
        }
    }
}

impl Guard {
    /// The guard of a server listening on `addr`; `token` is required where `addr` is not a
    /// loopback address.
    pub fn new(addr: SocketAddr, token: Option<String>) -> Guard {
        let port = addr.port();
        let hosts = match addr.ip() {
            ip if ip.is_unspecified() => Vec::new(),
            IpAddr::V4(ip) if ip.is_loopback() => {
                vec![format!("{ip}:{port}"), format!("localhost:{port}")]
            }
            IpAddr::V6(ip) if ip.is_loopback() => {
                vec![format!("[{ip}]:{port}"), format!("localhost:{port}")]
            }
            IpAddr::V4(ip) => vec![format!("{ip}:{port}")],
            IpAddr::V6(ip) => vec![format!("[{ip}]:{port}")],
        };
        Guard { hosts, token }
    }

    /// Check a request's `Host`, `Origin` and token (from the `token` query parameter or the
    /// `X-Attnviz-Token` header).
    pub fn check(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        query_token: Option<&str>,
        header_token: Option<&str>,
    ) -> Result<(), Refusal> {
        let host = host.ok_or(Refusal::Host)?;
        if !self.hosts.is_empty() && !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = origin {
            // The page's own fetches carry `http://HOST`; anything else (another site, `null`
            // from a sandboxed frame or a file) is refused.
            let ours = origin
                .strip_prefix("http://")
                .is_some_and(|rest| rest.eq_ignore_ascii_case(host));
            if !ours {
                return Err(Refusal::Origin);
            }
        }
        if let Some(token) = &self.token {
            let given = header_token.or(query_token).unwrap_or("");
            if !token_matches(given, token) {
                return Err(Refusal::Token);
            }
        }
        Ok(())
    }
}

/// The headers the guard reads, each of which a request may send once.
pub const SINGLE_HEADERS: [&str; 3] = ["host", "origin", "x-attnviz-token"];

/// A request whose address the guard cannot read one way only: answered 400, before the guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ambiguous {
    /// One of [`SINGLE_HEADERS`] more than once (two `Host` headers: which one a proxy or a
    /// cache in between went by is not known).
    Twice(&'static str),
    /// A request line in absolute form (`GET http://HOST/ HTTP/1.1`) naming another address
    /// than its `Host` header.
    HostAndTarget,
}

impl Ambiguous {
    /// The one line the client is told.
    pub fn message(self) -> String {
        match self {
            Ambiguous::Twice(name) => {
                format!("the request has more than one {name} header; send one")
            }
            Ambiguous::HostAndTarget => {
                "the request line names another address than the Host header".to_string()
            }
        }
    }
}

/// Whether a request is [`Ambiguous`]: `count` says how many times it has each header, `host`
/// is its `Host` header's value, `target` the address of its request line (absolute form only).
pub fn ambiguous(
    count: impl Fn(&'static str) -> usize,
    host: Option<&[u8]>,
    target: Option<&str>,
) -> Option<Ambiguous> {
    if let Some(name) = SINGLE_HEADERS.into_iter().find(|&n| count(n) > 1) {
        return Some(Ambiguous::Twice(name));
    }
    match (host, target) {
        (Some(host), Some(target)) if !host.eq_ignore_ascii_case(target.as_bytes()) => {
            Some(Ambiguous::HostAndTarget)
        }
        _ => None,
    }
}

/// Whether `given` is `token`, compared in constant time (subtle's `ct_eq`): how long the
/// comparison takes does not tell an attacker how much of a guess was right. Only the length,
/// which is public (48), can end it early.
pub fn token_matches(given: &str, token: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

/// A fresh random token: 24 bytes from the OS, as 48 hex digits.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The `token` parameter of a query string, if any.
pub fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> Guard {
        Guard::new("127.0.0.1:8750".parse().unwrap(), None)
    }

    #[test]
    fn loopback_accepts_its_own_host_and_origin() {
        let g = loopback();
        assert_eq!(g.check(Some("127.0.0.1:8750"), None, None, None), Ok(()));
        assert_eq!(
            g.check(
                Some("localhost:8750"),
                Some("http://localhost:8750"),
                None,
                None
            ),
            Ok(())
        );
    }

    #[test]
    fn another_host_or_origin_is_refused() {
        let g = loopback();
        assert_eq!(
            g.check(Some("evil.example:8750"), None, None, None),
            Err(Refusal::Host)
        );
        assert_eq!(
            g.check(Some("127.0.0.1:80"), None, None, None),
            Err(Refusal::Host)
        );
        assert_eq!(g.check(None, None, None, None), Err(Refusal::Host));
        assert_eq!(
            g.check(
                Some("127.0.0.1:8750"),
                Some("http://evil.example"),
                None,
                None
            ),
            Err(Refusal::Origin)
        );
        assert_eq!(
            g.check(Some("127.0.0.1:8750"), Some("null"), None, None),
            Err(Refusal::Origin)
        );
        assert_eq!(
            g.check(
                Some("127.0.0.1:8750"),
                Some("https://127.0.0.1:8750"),
                None,
                None
            ),
            Err(Refusal::Origin)
        );
    }

    #[test]
    fn off_loopback_the_token_is_required() {
        let g = Guard::new("10.1.2.3:9000".parse().unwrap(), Some("abc123".into()));
        let host = Some("10.1.2.3:9000");
        assert_eq!(g.check(host, None, None, None), Err(Refusal::Token));
        assert_eq!(
            g.check(host, None, Some("abc12"), None),
            Err(Refusal::Token)
        );
        assert_eq!(
            g.check(host, None, Some("abc1234"), None),
            Err(Refusal::Token)
        );
        assert_eq!(g.check(host, None, Some("abc123"), None), Ok(()));
        assert_eq!(g.check(host, None, None, Some("abc123")), Ok(()));
        assert_eq!(
            g.check(Some("10.1.2.4:9000"), None, Some("abc123"), None),
            Err(Refusal::Host)
        );
    }

    #[test]
    fn the_token_must_match_exactly() {
        let t = new_token().unwrap();
        assert!(token_matches(&t, &t));
        let mut last = t.clone().into_bytes();
        last[47] = if last[47] == b'0' { b'1' } else { b'0' };
        let mut first = t.clone().into_bytes();
        first[0] = if first[0] == b'0' { b'1' } else { b'0' };
        for wrong in [
            String::from_utf8(last).unwrap(),
            String::from_utf8(first).unwrap(),
            t[..47].to_string(),
            format!("{t}0"),
            t.to_uppercase(),
            String::new(),
        ] {
            assert!(!token_matches(&wrong, &t), "{wrong} matched {t}");
        }
    }

    #[test]
    fn a_wildcard_address_takes_any_host_but_only_its_own_origin() {
        let g = Guard::new("0.0.0.0:9000".parse().unwrap(), Some("abc".into()));
        let ok = |host, origin| g.check(Some(host), origin, Some("abc"), None);
        assert_eq!(ok("box.lan:9000", None), Ok(()));
        assert_eq!(ok("box.lan:9000", Some("http://box.lan:9000")), Ok(()));
        assert_eq!(
            ok("box.lan:9000", Some("http://evil.example")),
            Err(Refusal::Origin)
        );
        assert_eq!(
            g.check(Some("box.lan:9000"), None, None, None),
            Err(Refusal::Token)
        );
    }

    #[test]
    fn ipv6_loopback_hosts_are_bracketed() {
        let g = Guard::new("[::1]:8750".parse().unwrap(), None);
        assert_eq!(g.check(Some("[::1]:8750"), None, None, None), Ok(()));
        assert_eq!(g.check(Some("localhost:8750"), None, None, None), Ok(()));
        assert_eq!(
            g.check(Some("::1:8750"), None, None, None),
            Err(Refusal::Host)
        );
    }

    #[test]
    fn a_header_the_guard_reads_twice_or_a_host_the_target_contradicts_is_ambiguous() {
        let once = |_: &'static str| 1;
        let host = Some(&b"127.0.0.1:8750"[..]);
        assert_eq!(ambiguous(once, host, None), None);
        assert_eq!(ambiguous(once, host, Some("127.0.0.1:8750")), None);
        assert_eq!(
            ambiguous(once, Some(b"LOCALHOST:8750"), Some("localhost:8750")),
            None
        );
        assert_eq!(ambiguous(|_| 0, None, None), None);
        for name in SINGLE_HEADERS {
            let twice = |n: &'static str| if n == name { 2 } else { 1 };
            assert_eq!(ambiguous(twice, host, None), Some(Ambiguous::Twice(name)));
        }
        assert_eq!(
            ambiguous(once, host, Some("evil.example:8750")),
            Some(Ambiguous::HostAndTarget)
        );
        assert!(Ambiguous::Twice("host")
            .message()
            .contains("more than one host header"));
    }

    #[test]
    fn tokens_are_random_and_found_in_queries() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 48);
        assert_ne!(a, b);
        assert_eq!(query_token(Some("x=1&token=ff&y=2")), Some("ff"));
        assert_eq!(query_token(Some("x=1")), None);
        assert_eq!(query_token(None), None);
    }
}
