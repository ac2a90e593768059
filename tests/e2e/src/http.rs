//! A minimal HTTP GET for scraping the controller's endpoints (plain HTTP on loopback), the value
//! of a metric in a scrape, and a minimal HTTP request for the agents' kamikaze endpoint.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET http://{addr}{path}`: the status code and the body.
pub fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_owned()))
}

/// A port on 127.0.0.1 that is free now and that no parallel test process holds.
pub fn free_port() -> u16 {
    k8sm_testcluster::free_port().expect("a free port")
}

/// The value of the metric `name` (with its labels, if any: `name{label="value"}`) in a Prometheus
/// text scrape.
pub fn metric(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// Sends one HTTP/1.1 request to `addr`, with `token` as bearer token (if any) and a JSON `body`
/// (may be empty), as the controller POSTs a kamikaze; returns the status code.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> std::io::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {response:?}")))
}
