//! The `--url` that names the server and the protocol to drive it with.

use std::net::{SocketAddr, ToSocketAddrs};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Gopher,
    Gemini,
    Http,
    Https,
    Tcp,
    Quic,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Gopher => "gopher",
            Protocol::Gemini => "gemini",
            Protocol::Http => "http",
            Protocol::Https => "https",
            Protocol::Tcp => "tcp",
            Protocol::Quic => "quic",
        }
    }

    fn from_scheme(s: &str) -> Option<Protocol> {
        Some(match s.to_ascii_lowercase().as_str() {
            "gopher" => Protocol::Gopher,
            "gemini" => Protocol::Gemini,
            "http" => Protocol::Http,
            "https" => Protocol::Https,
            "tcp" => Protocol::Tcp,
            "quic" => Protocol::Quic,
            _ => return None,
        })
    }

    fn default_port(self) -> Option<u16> {
        match self {
            Protocol::Gopher => Some(70),
            Protocol::Gemini => Some(1965),
            Protocol::Http => Some(80),
            Protocol::Https => Some(443),
            Protocol::Quic => Some(443),
            Protocol::Tcp => None,
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Protocol::Gemini | Protocol::Https | Protocol::Quic)
    }

    /// Application protocols offered in the TLS handshake.
    pub fn alpn(self) -> &'static [&'static [u8]] {
        match self {
            Protocol::Https => &[b"http/1.1"],
            Protocol::Quic => &crate::quic::ALPN,
            _ => &[],
        }
    }

    pub fn is_http(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Https)
    }
}

/// A parsed `--url`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub protocol: Protocol,
    /// Host as written (brackets stripped for IPv6), used for SNI and the Host header.
    pub host: String,
    /// `host[:port]` exactly as written, for Host headers and Gemini URLs.
    pub authority: String,
    pub addr: SocketAddr,
    /// Path and query as written, `/` when empty.
    pub path: String,
}

const EXPECTED: &str =
    "expected SCHEME://HOST:PORT/PATH with scheme gopher, gemini, http, https, tcp or quic";

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| {
            if why.is_empty() {
                format!("invalid --url \"{url}\": {EXPECTED}")
            } else {
                format!("invalid --url \"{url}\": {why}; {EXPECTED}")
            }
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad(""))?;
        let protocol = Protocol::from_scheme(scheme)
            .ok_or_else(|| bad(&format!("unknown scheme \"{scheme}\"")))?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad("user information is not supported"));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| bad("malformed host"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("bad port"))?,
            None => protocol
                .default_port()
                .ok_or_else(|| bad("tcp needs an explicit port"))?,
        };
        if path
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(bad("spaces or control characters in the path"));
        }
        let addr = resolve(host, port).ok_or_else(|| {
            format!("invalid --url \"{url}\": cannot resolve host \"{host}\" (use an address such as 127.0.0.1)")
        })?;
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        Ok(Endpoint {
            protocol,
            host: host.to_string(),
            authority: authority.to_string(),
            addr,
            path,
        })
    }

    /// The gopher selector named by the URL path, as RFC 4266 defines it: the first character
    /// after `/` is the item type, the rest (percent-decoded) is the selector.
    pub fn gopher_selector(&self) -> Vec<u8> {
        let p = self.path.as_bytes();
        if p.len() <= 2 {
            return Vec::new();
        }
        percent_decode(&p[2..])
    }
}

fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) if !p.contains(':') => Some((h, Some(p))),
            Some(_) => None,
            None => Some((authority, None)),
        }
    }
}

/// Resolves to one address, IPv4 first: test servers and most configs listen on 127.0.0.1.
fn resolve(host: &str, port: u16) -> Option<SocketAddr> {
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs().ok()?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
}

pub fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme() {
        let t = Endpoint::parse("gopher://127.0.0.1:7070/0/about.txt").unwrap();
        assert_eq!(t.protocol, Protocol::Gopher);
        assert_eq!(t.addr, "127.0.0.1:7070".parse().unwrap());
        assert_eq!(t.gopher_selector(), b"/about.txt");
        let t = Endpoint::parse("gopher://127.0.0.1").unwrap();
        assert_eq!(t.addr.port(), 70);
        assert_eq!(t.gopher_selector(), b"");
        let t = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((t.protocol, t.path.as_str()), (Protocol::Http, "/"));
        let t = Endpoint::parse("https://localhost:8443/a?b=c").unwrap();
        assert_eq!(t.host, "localhost");
        assert_eq!(t.authority, "localhost:8443");
        assert!(t.addr.is_ipv4());
        assert_eq!(t.path, "/a?b=c");
        let t = Endpoint::parse("gemini://[::1]/x").unwrap();
        assert_eq!((t.host.as_str(), t.addr.port()), ("::1", 1965));
        let t = Endpoint::parse("tcp://127.0.0.1:79").unwrap();
        assert_eq!(t.protocol, Protocol::Tcp);
        let t = Endpoint::parse("quic://127.0.0.1:4433/f.bin").unwrap();
        assert_eq!((t.protocol, t.path.as_str()), (Protocol::Quic, "/f.bin"));
        assert!(t.protocol.uses_tls());
    }

    #[test]
    fn rejects_malformed() {
        for url in [
            "gopher//x",
            "ftp://127.0.0.1/",
            "http://:80/",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:0/",
            "tcp://127.0.0.1",
            "http://127.0.0.1/a b",
            "http://u@127.0.0.1/",
        ] {
            let e = Endpoint::parse(url).unwrap_err();
            assert!(e.starts_with(&format!("invalid --url \"{url}\"")), "{e}");
            assert!(e.contains("expected SCHEME://HOST:PORT/PATH"), "{e}");
        }
        let e = Endpoint::parse("gopher//x").unwrap_err();
        assert_eq!(
            e,
            "invalid --url \"gopher//x\": expected SCHEME://HOST:PORT/PATH with scheme gopher, gemini, http, https, tcp or quic"
        );
    }

    #[test]
    fn decodes_percent() {
        assert_eq!(percent_decode(b"a%20b%2"), b"a b%2");
        assert_eq!(percent_decode(b"%zz%41"), b"%zzA");
    }
}
