//! Same-site crawling for `scrape-website`: breadth-first from the start page, within
//! `max_pages` fetches and `max_depth` link hops, obeying the site's robots.txt, a bounded
//! number of fetches at once, every URL fetched at most once (loops end), and every fetch
//! through the guarded client (so redirects and DNS answers are re-checked).

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::Semaphore;
use url::Url;

use super::extract::sandbox::Sandbox;
use super::extract::{html, text};
use crate::net::{Guarded, Limits, NetError};

pub const USER_AGENT_TOKEN: &str = "genied";
pub const DEFAULT_MAX_PAGES: u32 = 10;
pub const MAX_PAGES_CAP: u32 = 100;
pub const DEFAULT_MAX_DEPTH: u32 = 2;
pub const MAX_DEPTH_CAP: u32 = 5;
/// Fetches in flight at once.
pub const CONCURRENCY: usize = 4;

#[derive(Debug, Clone)]
pub struct Page {
    pub url: String,
    pub title: Option<String>,
    pub text: String,
}

/// Why a crawl (or a single-page fetch) produced nothing. `Transient` failures are retried.
#[derive(Debug, Clone)]
pub enum FetchError {
    Permanent(String),
    Transient(String),
}

impl FetchError {
    pub fn message(&self) -> &str {
        match self {
            FetchError::Permanent(m) | FetchError::Transient(m) => m,
        }
    }
}

fn origin(u: &Url) -> String {
    u.origin().ascii_serialization()
}

/// Fetches one page; `Ok(None)` for a page that is not text (skipped while crawling).
pub async fn fetch_page(
    net: &Guarded,
    sandbox: &Sandbox,
    url: &str,
) -> Result<Option<Page>, FetchError> {
    let res = net.get(url, Limits::default()).await.map_err(|e| match e {
        NetError::Refused(m) => FetchError::Permanent(format!("fetching {url} was refused: {m}")),
        NetError::Failed(m) => FetchError::Transient(format!("could not fetch {url}: {m}")),
    })?;
    if res.status == 429 || res.status >= 500 {
        return Err(FetchError::Transient(format!(
            "{url} answered HTTP {}",
            res.status
        )));
    }
    if !(200..300).contains(&res.status) {
        return Err(FetchError::Permanent(format!(
            "{url} answered HTTP {}",
            res.status
        )));
    }
    let ct = res.content_type().to_ascii_lowercase();
    let final_url = res.url.to_string();
    if html::is_html(&ct, &res.body) {
        let (title, body) = html::to_text(&text::decode(&res.body))
            .map_err(|e| FetchError::Permanent(format!("{url}: {e}")))?;
        return Ok(Some(Page {
            url: final_url,
            title,
            text: body,
        }));
    }
    if ct.starts_with("text/") || ct.is_empty() {
        return Ok(Some(Page {
            url: final_url,
            title: None,
            text: text::decode(&res.body),
        }));
    }
    if ct.contains("pdf") {
        let t = sandbox
            .file_to_text("page.pdf", res.body.to_vec())
            .await
            .map_err(FetchError::Permanent)?;
        return Ok(Some(Page {
            url: final_url,
            title: None,
            text: t,
        }));
    }
    Ok(None)
}

/// The robots.txt rules of the start URL's site; a missing file allows everything.
async fn robots(net: &Guarded, start: &Url) -> Result<Option<texting_robots::Robot>, FetchError> {
    let Ok(robots_url) = start.join("/robots.txt") else {
        return Ok(None);
    };
    let limits = Limits {
        max_bytes: 512 * 1024,
        ..Limits::default()
    };
    match net.get(robots_url.as_str(), limits).await {
        Ok(r) if (200..300).contains(&r.status) => {
            Ok(texting_robots::Robot::new(USER_AGENT_TOKEN, &r.body).ok())
        }
        Ok(r) if r.status >= 500 => Err(FetchError::Transient(format!(
            "{robots_url} answered HTTP {}",
            r.status
        ))),
        Ok(_) => Ok(None),
        Err(NetError::Refused(m)) => Err(FetchError::Permanent(format!(
            "fetching {robots_url} was refused: {m}"
        ))),
        Err(NetError::Failed(m)) => Err(FetchError::Transient(format!(
            "could not fetch {robots_url}: {m}"
        ))),
    }
}

/// Crawls the site of `start`. The start page must be fetchable; later pages that fail are
/// skipped.
pub async fn crawl(
    net: &Guarded,
    start: &str,
    max_pages: u32,
    max_depth: u32,
) -> Result<Vec<Page>, FetchError> {
    let start = net
        .check(start)
        .map_err(|e| FetchError::Permanent(e.to_string()))?;
    let site = origin(&start);
    let robot = robots(net, &start).await?;
    let allowed = |u: &Url| robot.as_ref().is_none_or(|r| r.allowed(u.as_str()));
    if !allowed(&start) {
        return Err(FetchError::Permanent(format!(
            "robots.txt of {site} does not allow crawling {start}"
        )));
    }
    let sem = Arc::new(Semaphore::new(CONCURRENCY));
    let mut seen: HashSet<String> = HashSet::from([start.to_string()]);
    let mut frontier = vec![start.clone()];
    let mut pages = Vec::new();
    let mut fetched = 0u32;
    for depth in 0..=max_depth {
        if frontier.is_empty() || fetched >= max_pages {
            break;
        }
        let batch: Vec<Url> = frontier
            .drain(..)
            .take((max_pages - fetched) as usize)
            .collect();
        fetched += batch.len() as u32;
        let mut tasks = tokio::task::JoinSet::new();
        for (i, url) in batch.into_iter().enumerate() {
            let (net, sem) = (net.clone(), sem.clone());
            tasks.spawn(async move {
                let _permit = sem.acquire_owned().await;
                let res = net.get(url.as_str(), Limits::default()).await;
                (i, url, res)
            });
        }
        let mut results = Vec::new();
        while let Some(r) = tasks.join_next().await {
            if let Ok(r) = r {
                results.push(r);
            }
        }
        results.sort_by_key(|r| r.0);
        for (_, url, res) in results {
            let res = match res {
                Ok(r) => r,
                Err(e) if depth == 0 => {
                    return Err(match e {
                        NetError::Refused(m) => {
                            FetchError::Permanent(format!("fetching {url} was refused: {m}"))
                        }
                        NetError::Failed(m) => {
                            FetchError::Transient(format!("could not fetch {url}: {m}"))
                        }
                    });
                }
                Err(e) => {
                    tracing::debug!(%url, error = %e, "crawl: page skipped");
                    continue;
                }
            };
            if depth == 0 && !(200..300).contains(&res.status) {
                let msg = format!("{url} answered HTTP {}", res.status);
                return Err(if res.status >= 500 || res.status == 429 {
                    FetchError::Transient(msg)
                } else {
                    FetchError::Permanent(msg)
                });
            }
            // A redirect off the site ends this branch.
            if !(200..300).contains(&res.status) || origin(&res.url) != site {
                continue;
            }
            let ct = res.content_type().to_ascii_lowercase();
            let body = text::decode(&res.body);
            if html::is_html(&ct, &res.body) {
                if depth < max_depth {
                    for link in html::links(&body, &res.url) {
                        if origin(&link) == site && allowed(&link) && seen.insert(link.to_string())
                        {
                            frontier.push(link);
                        }
                    }
                }
                let (title, t) = match html::to_text(&body) {
                    Ok(r) => r,
                    Err(e) if depth == 0 => {
                        return Err(FetchError::Permanent(format!("{url}: {e}")));
                    }
                    Err(e) => {
                        tracing::debug!(%url, error = %e, "crawl: page skipped");
                        continue;
                    }
                };
                pages.push(Page {
                    url: res.url.to_string(),
                    title,
                    text: t,
                });
            } else if ct.starts_with("text/plain") {
                pages.push(Page {
                    url: res.url.to_string(),
                    title: None,
                    text: body,
                });
            }
        }
    }
    Ok(pages)
}

/// One text for a set of pages; each page is a section the optimiser recognises.
pub fn join_pages(pages: &[Page]) -> String {
    pages
        .iter()
        .map(|p| {
            format!(
                "=== {} ===\n{}\n\n{}",
                p.title.as_deref().unwrap_or(&p.url),
                p.url,
                p.text
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
