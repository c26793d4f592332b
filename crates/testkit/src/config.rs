//! Config writers for the real servers the tests run: each fills in its template from `conf/`
//! (bench/ fills in the same files), writes it into the test's directory and returns the
//! command line that runs the server in the foreground on it.
//!
//! The directives a caller adds may use `{dir}` and `{port}` themselves: they are filled in after
//! the caller's text is placed.

use std::path::Path;

use crate::server::binary;

/// The directives in which nginx configs differ; the rest is in `conf/nginx.conf`.
pub struct NginxConf<'a> {
    /// Main-context directives, the events block included.
    pub main: &'a str,
    /// http-context directives, the access log included: nginx's default one, under `logs/`
    /// of the test's directory, cannot be opened.
    pub http: &'a str,
    pub server: &'a str,
    /// (certificate, key): listen with TLS.
    pub tls: Option<(&'a Path, &'a Path)>,
}

impl Default for NginxConf<'_> {
    fn default() -> Self {
        NginxConf {
            main: "events { worker_connections 1024; }",
            http: "access_log off;",
            server: "",
            tls: None,
        }
    }
}

/// Writes `dir/nginx.conf` for one worker on 127.0.0.1:`port` serving `dir/www`.
pub fn nginx(dir: &Path, port: u16, conf: &NginxConf) -> Vec<String> {
    let (listen, server) = match conf.tls {
        Some((cert, key)) => (
            "127.0.0.1:{port} ssl".to_string(),
            format!(
                "ssl_certificate {}; ssl_certificate_key {}; {}",
                cert.display(),
                key.display(),
                conf.server
            ),
        ),
        None => ("127.0.0.1:{port}".to_string(), conf.server.to_string()),
    };
    let path = write(
        dir,
        port,
        "nginx.conf",
        include_str!("../conf/nginx.conf"),
        &[
            ("{main}", conf.main),
            ("{http}", conf.http),
            ("{server}", &server),
            ("{listen}", &listen),
        ],
    );
    let prefix = dir.display().to_string();
    argv("nginx", &["-e", "stderr", "-p", &prefix, "-c", &path])
}

/// Writes `dir/httpd.conf` for apache2 (prefork) on 127.0.0.1:`port` serving `dir/htdocs`, with
/// `extra` directives at the end.
pub fn apache2(dir: &Path, port: u16, extra: &str) -> Vec<String> {
    let template = include_str!("../conf/apache2.conf");
    let path = write(dir, port, "httpd.conf", template, &[("{extra}", extra)]);
    argv("apache2", &["-f", &path, "-DFOREGROUND"])
}

/// Writes `dir/lighttpd.conf` for lighttpd on 127.0.0.1:`port` serving `dir/www`, with `extra`
/// directives at the end.
pub fn lighttpd(dir: &Path, port: u16, extra: &str) -> Vec<String> {
    let template = include_str!("../conf/lighttpd.conf");
    let path = write(dir, port, "lighttpd.conf", template, &[("{extra}", extra)]);
    argv("lighttpd", &["-D", "-f", &path])
}

/// Fills in `template` (the caller's `parts` first, then `{dir}` and `{port}`) and writes it to
/// `dir/name`; returns that path.
fn write(dir: &Path, port: u16, name: &str, template: &str, parts: &[(&str, &str)]) -> String {
    let mut text = template.to_string();
    for (key, value) in parts {
        text = text.replace(key, value);
    }
    let text = text
        .replace("{dir}", &dir.display().to_string())
        .replace("{port}", &port.to_string());
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn argv(program: &str, args: &[&str]) -> Vec<String> {
    std::iter::once(binary(program).display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect()
}
