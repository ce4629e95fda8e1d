//! Outbound HTTP for user-supplied URLs (website import, crawling, worker `web_fetch`,
//! webhooks). The guard lives in the resolver, so the address that was checked is the
//! address that is connected to: names resolving to loopback, private, link-local,
//! metadata and other internal ranges are refused, IP literals are checked before the
//! request and on every redirect, and every response is bounded in time and size. Proxies
//! from the environment are ignored. DNS is hickory, never the C library's getaddrinfo:
//! the system's resolver configuration, or one nameserver named by `--dns-server`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::HeaderMap;
use reqwest::{Method, Url};

use crate::error::ApiError;

/// Why a fetch did not happen or did not finish.
#[derive(Debug, Clone, PartialEq)]
pub enum NetError {
    /// The URL is malformed, not http(s), or points at a forbidden address.
    Refused(String),
    /// The connection, TLS, timeout or read failed.
    Failed(String),
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetError::Refused(m) | NetError::Failed(m) => f.write_str(m),
        }
    }
}

impl From<NetError> for ApiError {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Refused(m) => ApiError::validation(m),
            NetError::Failed(m) => ApiError::upstream(m),
        }
    }
}

/// True for addresses no user-supplied URL may reach.
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_v4(v4);
            }
            let seg = v6.segments();
            // NAT64 (64:ff9b::/96) and IPv4-compatible (::a.b.c.d) embed an IPv4 address.
            if (seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0])
                || seg[..6] == [0; 6]
            {
                let o = v6.octets();
                return forbidden_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local, incl. fd00:ec2::254
                || (seg[0] & 0xffc0) == 0xfe80 // link-local
                || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        }
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16, cloud metadata
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // carrier-grade NAT 100.64/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18/15
        || o[0] >= 240 // reserved
}

/// Checks a URL before any request: http(s) only, no credentials, no forbidden IP literal.
/// The WHATWG parser already normalises decimal, octal and hex IPv4 spellings.
pub fn check_url(raw: &str, allow_private: bool) -> Result<Url, NetError> {
    check_url_allowing(raw, allow_private, &[])
}

/// `check_url`, except that a literal IP host whose exact `ip:port` (the port defaulting
/// from the scheme) is in `allowed` passes even when it is private. See `Guarded::with_allowed`.
pub fn check_url_allowing(
    raw: &str,
    allow_private: bool,
    allowed: &[SocketAddr],
) -> Result<Url, NetError> {
    let url = Url::parse(raw.trim())
        .map_err(|e| NetError::Refused(format!("'{raw}' is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NetError::Refused(format!(
            "only http and https URLs are allowed, not '{}'",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(NetError::Refused(
            "URLs with embedded credentials are not allowed".into(),
        ));
    }
    let ip = match url.host() {
        None => return Err(NetError::Refused(format!("'{raw}' has no host"))),
        Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
        Some(url::Host::Domain(_)) => None,
    };
    let exactly_allowed = ip.is_some_and(|ip| {
        url.port_or_known_default()
            .is_some_and(|port| allowed.contains(&SocketAddr::new(ip, port)))
    });
    if let Some(ip) = ip
        && !allow_private
        && !exactly_allowed
        && is_forbidden(ip)
    {
        return Err(NetError::Refused(format!(
            "address {ip} is not allowed (private, loopback or internal){OPT_IN}"
        )));
    }
    Ok(url)
}

/// Appended to every refusal: the operator of a closed network (or a test) needs to know the
/// one switch that lets internal addresses through.
const OPT_IN: &str = "; start genied with --allow-private-outbound to allow internal addresses (closed networks, tests)";

/// How long a create or update waits for DNS before accepting the URL unresolved; the fetch
/// checks again anyway, so a slow resolver must not hold the request.
const CHECK_RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves with hickory and refuses names that lead to a forbidden address.
#[derive(Clone)]
struct GuardedResolver {
    allow_private: bool,
    /// The one upstream nameserver (UDP and TCP on the same port); `None`: the system's.
    dns_server: Option<SocketAddr>,
    resolver: Arc<OnceLock<TokioResolver>>,
}

impl GuardedResolver {
    fn make(&self) -> Result<TokioResolver, hickory_resolver::ResolveError> {
        Ok(match self.dns_server {
            // No search domains: a name is looked up as given, so what is checked is exactly
            // the name of the URL.
            Some(ns) => TokioResolver::builder_with_config(
                ResolverConfig::from_parts(
                    None,
                    Vec::new(),
                    NameServerConfigGroup::from_ips_clear(&[ns.ip()], ns.port(), true),
                ),
                TokioConnectionProvider::default(),
            )
            .build(),
            None => TokioResolver::builder_tokio()?.build(),
        })
    }

    fn resolver(&self) -> Result<&TokioResolver, NetError> {
        if let Some(r) = self.resolver.get() {
            return Ok(r);
        }
        let built = self
            .make()
            .map_err(|e| NetError::Failed(format!("dns error: {e}")))?;
        let _ = self.resolver.set(built);
        Ok(self.resolver.get().expect("just set"))
    }

    /// The addresses of `host`, every one of them allowed: `Refused` names the first
    /// forbidden one, `Failed` is a lookup that did not answer.
    async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, NetError> {
        // Names that are IP literals in disguise never reach DNS.
        let bare = host.trim_end_matches('.').to_ascii_lowercase();
        let ips: Vec<IpAddr> = if bare == "localhost" || bare.ends_with(".localhost") {
            vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]
        } else {
            self.resolver()?
                .lookup_ip(host)
                .await
                .map_err(|e| NetError::Failed(format!("dns error: {e}")))?
                .iter()
                .collect()
        };
        if !self.allow_private
            && let Some(bad) = ips.iter().find(|ip| is_forbidden(**ip))
        {
            return Err(NetError::Refused(format!(
                "{host} resolves to {bad}, which is not allowed (private, loopback or internal){OPT_IN}"
            )));
        }
        Ok(ips)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let ips = this.lookup(name.as_str()).await?;
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

impl std::error::Error for NetError {}

/// Limits of one fetch.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 5 * 1024 * 1024,
            timeout: Duration::from_secs(20),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Where the last redirect led.
    pub url: Url,
    /// True when the body was cut at `max_bytes`.
    pub truncated: bool,
}

impl Fetched {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn content_type(&self) -> &str {
        self.headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// The one client for user-supplied URLs.
#[derive(Clone)]
pub struct Guarded {
    /// Built on first use: loading the TLS roots costs memory and startup time a service
    /// that never fetches a URL should not pay.
    client: Arc<OnceLock<reqwest::Client>>,
    allow_private: bool,
    allowed: Arc<Vec<SocketAddr>>,
    /// Shared by the client and [`Guarded::check_resolved`], so both ask the same server.
    resolver: GuardedResolver,
}

impl Guarded {
    /// A client resolving with the system's DNS configuration.
    pub fn new(allow_private: bool) -> Guarded {
        Self::build(allow_private, Vec::new(), None)
    }

    /// A client asking only `dns_server` (`ip:port`, UDP and TCP) when given, else the
    /// system's resolver configuration. The address guard applies to whatever it answers.
    pub fn with_dns_server(allow_private: bool, dns_server: Option<SocketAddr>) -> Guarded {
        Self::build(allow_private, Vec::new(), dns_server)
    }

    /// The service's client: `--allow-private-outbound` and `--dns-server`.
    pub fn from_config(config: &crate::config::Config) -> Guarded {
        Self::with_dns_server(config.allow_private_outbound, config.dns_server)
    }

    /// A strict client (private addresses refused) that nevertheless permits these exact
    /// `ip:port` pairs when a URL names them as a literal IP. It exists for tests: a fake
    /// server on a loopback address can be the first hop, and everything else it points to
    /// (a redirect to another port or address, a name resolving to loopback) is still refused.
    /// The service never builds one; `--allow-private-outbound` is the only production switch
    /// that lets private addresses through.
    pub fn with_allowed(allowed: Vec<SocketAddr>) -> Guarded {
        Self::build(false, allowed, None)
    }

    fn build(
        allow_private: bool,
        allowed: Vec<SocketAddr>,
        dns_server: Option<SocketAddr>,
    ) -> Guarded {
        Guarded {
            client: Arc::new(OnceLock::new()),
            allow_private,
            allowed: Arc::new(allowed),
            resolver: GuardedResolver {
                allow_private,
                dns_server,
                resolver: Arc::new(OnceLock::new()),
            },
        }
    }

    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(|| {
            let (allow_private, for_redirects) = (self.allow_private, self.allowed.clone());
            let resolver = self.resolver.clone();
            let redirect = reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 5 {
                    attempt.error("too many redirects (more than 5)")
                } else if let Err(e) =
                    check_url_allowing(attempt.url().as_str(), allow_private, &for_redirects)
                {
                    attempt.error(format!("redirect refused: {e}"))
                } else {
                    attempt.follow()
                }
            });
            reqwest::Client::builder()
                .no_proxy()
                .dns_resolver(Arc::new(resolver))
                .redirect(redirect)
                .connect_timeout(Duration::from_secs(10))
                .user_agent(concat!("genied/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("static client configuration")
        })
    }

    pub fn check(&self, url: &str) -> Result<Url, NetError> {
        check_url_allowing(url, self.allow_private, &self.allowed)
    }

    /// [`Guarded::check`], then, for a host name, a lookup now through the same resolver the
    /// fetch uses: a URL that would be refused later is refused when it is given (create,
    /// update). A lookup that fails or times out is not a refusal (the name may exist by the
    /// time of the fetch), and the fetch checks again whatever DNS says then.
    pub async fn check_resolved(&self, raw: &str) -> Result<Url, NetError> {
        let url = self.check(raw)?;
        if self.allow_private {
            return Ok(url);
        }
        let Some(url::Host::Domain(host)) = url.host() else {
            return Ok(url);
        };
        match tokio::time::timeout(CHECK_RESOLVE_TIMEOUT, self.resolver.lookup(host)).await {
            Ok(Err(refused @ NetError::Refused(_))) => Err(refused),
            Ok(Err(NetError::Failed(e))) => {
                tracing::debug!(host, error = %e, "name not resolved at check; the fetch will check again");
                Ok(url)
            }
            Err(_) => {
                tracing::debug!(
                    host,
                    "name lookup timed out at check; the fetch will check again"
                );
                Ok(url)
            }
            Ok(Ok(_)) => Ok(url),
        }
    }

    pub async fn get(&self, url: &str, limits: Limits) -> Result<Fetched, NetError> {
        self.fetch(Method::GET, url, HeaderMap::new(), None, limits)
            .await
    }

    /// Sends one request and reads at most `limits.max_bytes` of the answer.
    pub async fn fetch(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        limits: Limits,
    ) -> Result<Fetched, NetError> {
        let url = self.check(url)?;
        let req_method = method.clone();
        let mut req = self
            .client()
            .request(method, url)
            .headers(headers)
            .timeout(limits.timeout);
        if let Some(b) = body {
            req = req.body(b);
        }
        let span = if crate::telemetry::trace::enabled() {
            tracing::info_span!("http.fetch", method = %req_method)
        } else {
            tracing::Span::none()
        };
        let req = span.in_scope(|| crate::telemetry::trace::inject(req));
        let mut resp = tracing::Instrument::instrument(req.send(), span)
            .await
            .map_err(describe)?;
        let (status, headers, final_url) = (
            resp.status().as_u16(),
            resp.headers().clone(),
            resp.url().clone(),
        );
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = resp.chunk().await.map_err(describe)? {
            let room = limits.max_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            status,
            headers,
            body: Bytes::from(body),
            url: final_url,
            truncated,
        })
    }
}

/// Turns reqwest's error chain into one readable line, keeping refusals as refusals.
fn describe(e: reqwest::Error) -> NetError {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg = format!("{msg}: {s}");
        src = s.source();
    }
    if msg.contains("not allowed") || msg.contains("redirect refused") {
        NetError::Refused(msg)
    } else if e.is_timeout() {
        NetError::Failed(format!("request timed out: {msg}"))
    } else {
        NetError::Failed(msg)
    }
}

/// A plain client for configured services (voice platform, LLM, SMTP relays over HTTP):
/// their addresses are the operator's choice, so no address guard, but still hickory DNS,
/// no environment proxies and a timeout.
pub fn service_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .hickory_dns(true)
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("genied/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("static client configuration")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_internal_addresses_in_every_spelling() {
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://172.16.5.4/",
            "http://192.168.1.1/",
            "http://0.0.0.0/",
            "http://[fd00:ec2::254]/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
            "http://[64:ff9b::7f00:1]/",
        ] {
            assert!(
                matches!(check_url(url, false), Err(NetError::Refused(_))),
                "{url} should be refused"
            );
        }
        assert!(check_url("http://127.0.0.1/", true).is_ok());
        assert!(check_url("https://93.184.215.14/", false).is_ok());
        assert!(check_url("https://example.com/page", false).is_ok());
        assert!(matches!(
            check_url("file:///etc/passwd", false),
            Err(NetError::Refused(_))
        ));
        assert!(matches!(
            check_url("http://user:pw@example.com/", false),
            Err(NetError::Refused(_))
        ));
    }

    #[test]
    fn allow_list_is_exact_ip_and_port() {
        let a: SocketAddr = "127.0.0.2:8080".parse().unwrap();
        assert!(check_url_allowing("http://127.0.0.2:8080/x", false, &[a]).is_ok());
        for url in [
            "http://127.0.0.2:8081/",
            "http://127.0.0.2/",
            "http://127.0.0.1:8080/",
            "http://[::ffff:127.0.0.2]:8080/",
        ] {
            assert!(
                matches!(
                    check_url_allowing(url, false, &[a]),
                    Err(NetError::Refused(_))
                ),
                "{url} should be refused"
            );
        }
    }
}
