//! The `Http` kamikaze's URL for one node, from `spec.kamikaze.urlTemplate` (docs/design.md §5.4).
//! A node writes its own name and InternalIP, so whoever controls its executor chooses them, and a
//! URL built from them by string replacement could send the controller, with its credential,
//! anywhere: a host of the node's choosing, another path of a fixed host, a cloud metadata
//! endpoint. So the host is fixed by the operator or exactly `{nodeIP}`, which must parse as an IP
//! address, and every value put into the path, query or fragment is percent-encoded.

use std::net::IpAddr;

use crate::{Kamikaze, URL_PLACEHOLDER_NODE_IP, URL_PLACEHOLDER_NODE_NAME};

/// How much of a node-supplied value an error quotes: enough to recognise it, never a whole
/// annotation-sized blob.
const QUOTED_MAX_CHARS: usize = 64;

/// Why no kamikaze URL can be built for a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KamikazeUrlError {
    /// The policy has no `urlTemplate`.
    #[error("kamikaze mechanism Http without kamikaze.urlTemplate: set one")]
    NoTemplate,
    /// The template itself can never give a safe URL.
    #[error("kamikaze.urlTemplate {0}")]
    Template(&'static str),
    /// A plain http:// template without `allowInsecureHttp` (an old CRD did not refuse it).
    #[error(
        "kamikaze.urlTemplate is a plain http:// URL, which carries the controller's token unencrypted: use https://, \
         or set kamikaze.allowInsecureHttp: true"
    )]
    InsecureHttp,
    /// The template needs the node's InternalIP address and the node reports none.
    #[error("the kamikaze URL needs the node's InternalIP address, and the node reports none")]
    AddressMissing,
    /// The node's InternalIP is not an IP address (a host name, say): k8sm never resolves names the
    /// node chose.
    #[error(
        "the node's InternalIP {0} is not an IP address: k8sm POSTs the kamikaze only to an IP address, never to a \
         host name taken from the node's own data; fix the node's addresses or use another kamikaze mechanism"
    )]
    AddressNotIp(String),
    /// The node's InternalIP is an IP address no node can be reached at, or one that belongs to the
    /// host's own infrastructure (link-local: cloud metadata endpoints).
    #[error(
        "the node's InternalIP {0} is {1} address, not one a node's agent can be reached at: no kamikaze is POSTed \
         there"
    )]
    AddressNotUnicast(IpAddr, &'static str),
}

impl Kamikaze {
    /// The kamikaze URL for the node named `node_name` whose InternalIP is `node_ip`: `urlTemplate`
    /// with its placeholders replaced. `{nodeIP}` as the template's host becomes the address
    /// (IPv6 in brackets); anywhere after the host, both placeholders become their
    /// percent-encoded values.
    pub fn url_for(
        &self,
        node_name: &str,
        node_ip: Option<&str>,
    ) -> Result<String, KamikazeUrlError> {
        let template = self.secure_template()?;
        let parts = Parts::of(template)?;
        let needs_ip = parts.ip_host || parts.rest.contains(URL_PLACEHOLDER_NODE_IP);
        let ip = if needs_ip {
            Some(parse_node_ip(
                node_ip.ok_or(KamikazeUrlError::AddressMissing)?,
            )?)
        } else {
            None
        };
        let ip_text = ip.map(|ip| ip.to_string()).unwrap_or_default();
        let mut url = String::with_capacity(template.len() + node_name.len());
        url.push_str(parts.before_host);
        match (parts.ip_host, ip) {
            (true, Some(IpAddr::V6(v6))) => url.push_str(&format!("[{v6}]")),
            (true, Some(IpAddr::V4(v4))) => url.push_str(&v4.to_string()),
            _ => {}
        }
        url.push_str(parts.after_host);
        substitute(parts.rest, node_name, &ip_text, &mut url);
        Ok(url)
    }

    /// Whether `urlTemplate` can give safe URLs at all (independent of any node): `Err` says why
    /// not.
    pub fn check_url_template(&self) -> Result<(), KamikazeUrlError> {
        Parts::of(self.secure_template()?).map(|_| ())
    }

    /// Whether the kamikaze is POSTed over plain http:// (allowed by `allowInsecureHttp`).
    pub fn is_insecure_http(&self) -> bool {
        self.url_template.as_deref().is_some_and(is_plain_http)
    }

    /// The template, unless it is plain http:// without the opt-in.
    fn secure_template(&self) -> Result<&str, KamikazeUrlError> {
        let template = self
            .url_template
            .as_deref()
            .ok_or(KamikazeUrlError::NoTemplate)?;
        if is_plain_http(template) && !self.allow_insecure_http {
            return Err(KamikazeUrlError::InsecureHttp);
        }
        Ok(template)
    }
}

fn is_plain_http(template: &str) -> bool {
    template
        .get(.."http://".len())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
}

/// A template split around its host.
struct Parts<'a> {
    /// `scheme://`, userinfo and, for a fixed host, the host.
    before_host: &'a str,
    /// The host is exactly `{nodeIP}`.
    ip_host: bool,
    /// After a `{nodeIP}` host: its `:port`, if any.
    after_host: &'a str,
    /// Path, query and fragment.
    rest: &'a str,
}

impl<'a> Parts<'a> {
    fn of(template: &'a str) -> Result<Self, KamikazeUrlError> {
        let scheme_end = ["http://", "https://"]
            .iter()
            .find(|scheme| template.starts_with(*scheme))
            .map(|scheme| scheme.len())
            .ok_or(KamikazeUrlError::Template(
                "must start with http:// or https://",
            ))?;
        let authority_end = template[scheme_end..]
            .find(['/', '?', '#'])
            .map_or(template.len(), |at| scheme_end + at);
        let authority = &template[scheme_end..authority_end];
        let rest = &template[authority_end..];
        // Userinfo ends at the last '@' (RFC 3986 §3.2); what follows is host[:port].
        let host_start = authority
            .rfind('@')
            .map_or(scheme_end, |at| scheme_end + at + 1);
        let host_port = &template[host_start..authority_end];
        if let Some(port) = host_port.strip_prefix(URL_PLACEHOLDER_NODE_IP) {
            let digits = port.strip_prefix(':').unwrap_or("x");
            if !(port.is_empty()
                || (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())))
            {
                return Err(KamikazeUrlError::Template(
                    "must have {nodeIP} alone as its host, followed by nothing or by :PORT",
                ));
            }
            if template[..host_start].contains('{') {
                return Err(KamikazeUrlError::Template(
                    "must not put a placeholder before the host (in the userinfo)",
                ));
            }
            return Ok(Self {
                before_host: &template[..host_start],
                ip_host: true,
                after_host: port,
                rest,
            });
        }
        if authority.contains(URL_PLACEHOLDER_NODE_NAME)
            || authority.contains(URL_PLACEHOLDER_NODE_IP)
        {
            return Err(KamikazeUrlError::Template(
                "must have a fixed host or exactly {nodeIP} as its host: a host name made from the node's name or \
                 address would let the node choose where k8sm sends its credential",
            ));
        }
        Ok(Self {
            before_host: &template[..authority_end],
            ip_host: false,
            after_host: "",
            rest,
        })
    }
}

/// The node's InternalIP as an address the controller may POST to.
fn parse_node_ip(text: &str) -> Result<IpAddr, KamikazeUrlError> {
    // `IpAddr`'s parser accepts only the canonical textual forms: no zone index, no octal or
    // shortened IPv4.
    let ip: IpAddr = text
        .parse()
        .map_err(|_| KamikazeUrlError::AddressNotIp(quoted(text)))?;
    let not_unicast = match ip {
        _ if ip.is_unspecified() => Some("an unspecified"),
        _ if ip.is_multicast() => Some("a multicast"),
        IpAddr::V4(v4) if v4.is_broadcast() => Some("the broadcast"),
        IpAddr::V4(v4) if v4.is_link_local() => Some("a link-local (169.254.0.0/16)"),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some("a link-local (fe80::/10)"),
        _ => None,
    };
    match not_unicast {
        Some(kind) => Err(KamikazeUrlError::AddressNotUnicast(ip, kind)),
        None => Ok(ip),
    }
}

/// Appends `rest` to `url` with every placeholder replaced by its percent-encoded value, in one
/// pass (a value is never searched for placeholders).
fn substitute(mut rest: &str, node_name: &str, node_ip: &str, url: &mut String) {
    while let Some(at) = rest.find('{') {
        url.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix(URL_PLACEHOLDER_NODE_NAME) {
            percent_encode(node_name, url);
            rest = after;
        } else if let Some(after) = tail.strip_prefix(URL_PLACEHOLDER_NODE_IP) {
            percent_encode(node_ip, url);
            rest = after;
        } else {
            url.push('{');
            rest = &tail[1..];
        }
    }
    url.push_str(rest);
}

/// Percent-encodes every byte of `value` except RFC 3986's unreserved characters, so a value stays
/// one path segment or one query value whatever it contains.
pub fn percent_encode(value: &str, out: &mut String) {
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

/// `value` for an error message: quoted and escaped, cut after [`QUOTED_MAX_CHARS`] characters.
fn quoted(value: &str) -> String {
    let cut: String = value.chars().take(QUOTED_MAX_CHARS).collect();
    if cut.len() < value.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KamikazeMechanism;

    fn http(template: &str) -> Kamikaze {
        Kamikaze {
            mechanism: KamikazeMechanism::Http,
            url_template: Some(template.into()),
            allow_insecure_http: true,
        }
    }

    #[test]
    fn plain_http_needs_the_opt_in() {
        let mut kamikaze = http("http://{nodeIP}:10260/kamikaze");
        assert!(kamikaze.is_insecure_http());
        assert!(kamikaze.url_for("n1", Some("10.0.0.1")).is_ok());
        kamikaze.allow_insecure_http = false;
        assert_eq!(
            kamikaze.check_url_template(),
            Err(KamikazeUrlError::InsecureHttp)
        );
        assert_eq!(
            kamikaze.url_for("n1", Some("10.0.0.1")),
            Err(KamikazeUrlError::InsecureHttp)
        );
        let secure = Kamikaze {
            allow_insecure_http: false,
            ..http("https://{nodeIP}:10260/kamikaze")
        };
        assert!(!secure.is_insecure_http());
        assert_eq!(
            secure.url_for("n1", Some("10.0.0.1")).as_deref(),
            Ok("https://10.0.0.1:10260/kamikaze")
        );
    }

    fn url(template: &str, name: &str, ip: Option<&str>) -> Result<String, KamikazeUrlError> {
        http(template).url_for(name, ip)
    }

    #[test]
    fn an_ipv4_host_and_plain_values() {
        assert_eq!(
            url(
                "http://{nodeIP}:10260/kamikaze?node={nodeName}&again={nodeName}",
                "node-1",
                Some("10.0.0.7")
            ),
            Ok("http://10.0.0.7:10260/kamikaze?node=node-1&again=node-1".into())
        );
        assert_eq!(
            url("https://{nodeIP}/kamikaze", "n", Some("192.168.1.20")),
            Ok("https://192.168.1.20/kamikaze".into())
        );
    }

    #[test]
    fn an_ipv6_host_is_bracketed_and_canonical() {
        assert_eq!(
            url(
                "http://{nodeIP}:10260/kamikaze/{nodeName}",
                "node-1",
                Some("::1")
            ),
            Ok("http://[::1]:10260/kamikaze/node-1".into())
        );
        assert_eq!(
            url("http://{nodeIP}/k", "n", Some("2001:DB8:0:0:0:0:0:1")),
            Ok("http://[2001:db8::1]/k".into())
        );
        assert_eq!(
            url("http://{nodeIP}/k", "n", Some("::ffff:10.0.0.1")),
            Ok("http://[::ffff:10.0.0.1]/k".into())
        );
    }

    #[test]
    fn an_address_after_the_host_is_a_percent_encoded_value() {
        assert_eq!(
            url(
                "https://proxy.example/kamikaze?ip={nodeIP}",
                "n",
                Some("2001:db8::1")
            ),
            Ok("https://proxy.example/kamikaze?ip=2001%3Adb8%3A%3A1".into())
        );
    }

    #[test]
    fn values_are_percent_encoded() {
        // Node names are DNS subdomains, which need no encoding; the encoder itself must not rely
        // on that.
        assert_eq!(
            url("https://proxy.example/k/{nodeName}?n={nodeName}", "a/b?c=d&e#f %{nodeIP}", None),
            Ok("https://proxy.example/k/a%2Fb%3Fc%3Dd%26e%23f%20%25%7BnodeIP%7D?n=a%2Fb%3Fc%3Dd%26e%23f%20%25%7BnodeIP%7D"
                .into()),
            "a value never adds a segment, a query parameter or a placeholder"
        );
        let mut out = String::new();
        percent_encode("ip-10-0-0-1.ec2.internal_~Zé", &mut out);
        assert_eq!(out, "ip-10-0-0-1.ec2.internal_~Z%C3%A9");
    }

    #[test]
    fn a_template_without_the_address_needs_none() {
        assert_eq!(
            url(
                "http://127.0.0.1:8080/kamikaze/{nodeName}",
                "node-0003",
                None
            ),
            Ok("http://127.0.0.1:8080/kamikaze/node-0003".into())
        );
        assert_eq!(
            url(
                "http://127.0.0.1:8080/kamikaze/{nodeName}",
                "n",
                Some("not an ip")
            ),
            Ok("http://127.0.0.1:8080/kamikaze/n".into()),
            "an address the URL does not use is not judged"
        );
        assert_eq!(
            url("http://h/{x}/{nodeName", "n", None),
            Ok("http://h/{x}/{nodeName".into()),
            "text that is no placeholder stays"
        );
    }

    #[test]
    fn a_missing_address_is_reported() {
        assert_eq!(
            url("http://{nodeIP}/k", "n", None),
            Err(KamikazeUrlError::AddressMissing)
        );
        assert_eq!(
            url("http://proxy/k?ip={nodeIP}", "n", None),
            Err(KamikazeUrlError::AddressMissing)
        );
    }

    #[test]
    fn an_address_that_is_not_an_ip_is_refused() {
        for bad in [
            "localhost",
            "evil.example",
            "10.0.0.1.nip.io",
            "010.0.0.1",
            "10.1",
            " 10.0.0.1",
            "10.0.0.1:80",
            "[::1]",
            "fe80::1%eth0",
            "",
        ] {
            let error = url("http://{nodeIP}:10260/k", "n", Some(bad)).expect_err(bad);
            assert_eq!(
                error,
                KamikazeUrlError::AddressNotIp(format!("{bad:?}")),
                "{bad:?}"
            );
            assert!(
                error.to_string().contains("is not an IP address"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_long_or_odd_address_is_quoted_short_and_escaped() {
        let long = format!("\u{1b}[31m{}", "a".repeat(10_000));
        let KamikazeUrlError::AddressNotIp(quoted) =
            url("http://{nodeIP}/k", "n", Some(&long)).unwrap_err()
        else {
            panic!("not AddressNotIp");
        };
        assert!(quoted.len() < 100, "{quoted}");
        assert!(quoted.starts_with("\"\\u{1b}[31m"), "{quoted}");
        assert!(
            !quoted.contains('\u{1b}'),
            "no raw control character: {quoted}"
        );
    }

    #[test]
    fn addresses_no_agent_has_are_refused() {
        for (bad, kind) in [
            ("0.0.0.0", "an unspecified"),
            ("::", "an unspecified"),
            ("224.0.0.1", "a multicast"),
            ("ff02::1", "a multicast"),
            ("255.255.255.255", "the broadcast"),
            ("169.254.169.254", "a link-local (169.254.0.0/16)"),
            ("fe80::1", "a link-local (fe80::/10)"),
        ] {
            assert_eq!(
                url("http://{nodeIP}/k", "n", Some(bad)),
                Err(KamikazeUrlError::AddressNotUnicast(
                    bad.parse().unwrap(),
                    kind
                )),
                "{bad}"
            );
        }
        // Loopback and private addresses are addresses of real (or test) nodes.
        for good in ["127.0.0.1", "::1", "10.0.0.1", "fd00::1"] {
            assert!(url("http://{nodeIP}/k", "n", Some(good)).is_ok(), "{good}");
        }
    }

    #[test]
    fn the_host_is_fixed_or_exactly_the_node_ip() {
        for (bad, why) in [
            (
                "http://{nodeName}:10260/k",
                "fixed host or exactly {nodeIP}",
            ),
            (
                "http://{nodeName}.nodes.example/k",
                "fixed host or exactly {nodeIP}",
            ),
            ("http://{nodeIP}.nip.io/k", "{nodeIP} alone as its host"),
            ("http://x{nodeIP}/k", "fixed host or exactly {nodeIP}"),
            ("http://{nodeIP}:{nodeName}/k", "{nodeIP} alone as its host"),
            ("http://{nodeIP}:/k", "{nodeIP} alone as its host"),
            ("http://{nodeName}@{nodeIP}/k", "in the userinfo"),
            (
                "http://{nodeName}@proxy/k",
                "fixed host or exactly {nodeIP}",
            ),
            ("ftp://{nodeIP}/k", "http:// or https://"),
        ] {
            let error = url(bad, "n", Some("10.0.0.1")).expect_err(bad);
            assert!(
                matches!(error, KamikazeUrlError::Template(_)),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains(why), "{bad}: {error}");
            assert_eq!(http(bad).check_url_template(), Err(error), "{bad}");
        }
        for good in [
            "http://{nodeIP}",
            "http://{nodeIP}:1/k",
            "https://user:pw@{nodeIP}:8443/k?n={nodeName}#{nodeName}",
            "https://proxy.example:8443/k/{nodeName}",
        ] {
            assert_eq!(http(good).check_url_template(), Ok(()), "{good}");
            assert!(url(good, "n", Some("10.0.0.1")).is_ok(), "{good}");
        }
        assert_eq!(
            url(
                "https://user:pw@{nodeIP}:8443/k?n={nodeName}#{nodeName}",
                "n",
                Some("::1")
            ),
            Ok("https://user:pw@[::1]:8443/k?n=n#n".into())
        );
    }

    #[test]
    fn no_template_no_url() {
        assert_eq!(
            Kamikaze::default().url_for("n", Some("10.0.0.1")),
            Err(KamikazeUrlError::NoTemplate)
        );
    }
}
