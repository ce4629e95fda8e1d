//! `create`: a text document (`create-notes`, the default) or an advanced source
//! (`upload-website`, `scrape-website`, `extract-youtube`, `upload-pdf`, `extract-document`).
//! The record is stored at once with status `pending_extraction`; the pipeline does the rest.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::{ActionRequest, Ctx, Reply, parse_uuid, parse_value};
use super::{check_folder, record};
use crate::db::documents::{self as docs, NewDocument, Scope};
use crate::error::{ApiError, ApiResult};
use crate::knowledge::{self, crawl, extract, pipeline};

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentCreate")]
pub(crate) struct CreateReq {
    action: Option<String>,
    data: Option<Value>,
    title: Option<String>,
    name: Option<String>,
    content: Option<String>,
    agent_id: Option<String>,
    #[serde(rename = "folder_id", alias = "folderId")]
    folder_id: Option<String>,
    #[serde(rename = "is_public", alias = "isPublic")]
    is_public: Option<bool>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SourceReq {
    url: Option<String>,
    #[serde(rename = "max_pages", alias = "maxPages")]
    max_pages: Option<u32>,
    #[serde(rename = "max_depth", alias = "maxDepth")]
    max_depth: Option<u32>,
    filename: Option<String>,
    #[serde(rename = "content_base64", alias = "contentBase64")]
    content_base64: Option<String>,
    name: Option<String>,
    title: Option<String>,
    agent_id: Option<String>,
    #[serde(rename = "folder_id", alias = "folderId")]
    folder_id: Option<String>,
    #[serde(rename = "is_public", alias = "isPublic")]
    is_public: Option<bool>,
}

/// A document to store, before it has an id.
pub(crate) struct Draft {
    pub name: String,
    pub doc_type: &'static str,
    pub source_url: Option<String>,
    pub original: Option<Vec<u8>>,
    pub filename: Option<String>,
    pub options: Value,
    pub size: i64,
    pub agent_id: Option<String>,
    pub folder_id: Option<String>,
    pub is_public: bool,
}

fn clean_name(n: &str) -> ApiResult<String> {
    let n = n.trim();
    if n.is_empty() || n.chars().count() > 255 {
        return Err(ApiError::validation(
            "the document name (data.title) must be 1 to 255 characters",
        ));
    }
    Ok(n.to_string())
}

fn default_name(url: &url::Url) -> String {
    let s = url.as_str();
    s.chars().take(255).collect()
}

pub async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: CreateReq = req.data()?;
    let sub = r.action.clone().unwrap_or_else(|| "create-notes".into());
    let max = ctx.app.config.max_upload_bytes;
    let draft = if sub == "create-notes" || sub == "create" {
        let title = r
            .title
            .clone()
            .or(r.name.clone())
            .ok_or_else(|| ApiError::validation("data.title is required"))?;
        let content = r
            .content
            .clone()
            .ok_or_else(|| ApiError::validation("data.content is required"))?;
        if content.trim().is_empty() {
            return Err(ApiError::validation("data.content must not be empty"));
        }
        if content.len() > max {
            return Err(ApiError::payload_too_large(max));
        }
        Draft {
            name: clean_name(&title)?,
            doc_type: "text",
            source_url: None,
            size: content.len() as i64,
            original: Some(content.into_bytes()),
            filename: None,
            options: json!({}),
            agent_id: r.agent_id.clone(),
            folder_id: r.folder_id.clone(),
            is_public: r.is_public.unwrap_or(false),
        }
    } else {
        let s: SourceReq = match &r.data {
            Some(v @ Value::Object(_)) => parse_value(v, "data.data")?,
            None | Some(Value::Null) => {
                return Err(ApiError::validation(format!(
                    "data.data is required for '{sub}'"
                )));
            }
            Some(_) => return Err(ApiError::validation("data.data must be an object")),
        };
        advanced(ctx, &sub, &r, s, max)?
    };
    // A name resolving to an internal address is refused now, as the address spelled out
    // is, instead of being accepted and failed by the pipeline later. (A YouTube URL is only
    // read for its video id: the transcript comes from the configured source.)
    if matches!(draft.doc_type, "url" | "website")
        && let Some(u) = &draft.source_url
    {
        ctx.app
            .net
            .check_resolved(u)
            .await
            .map_err(|e| ApiError::validation(format!("data.data.url: {e}")))?;
    }
    let reply = insert(ctx, draft).await?;
    Ok(reply)
}

fn advanced(ctx: &Ctx, sub: &str, r: &CreateReq, s: SourceReq, max: usize) -> ApiResult<Draft> {
    let name = s
        .name
        .clone()
        .or(s.title.clone())
        .or(r.title.clone())
        .or(r.name.clone());
    let mut d = Draft {
        name: String::new(),
        doc_type: "text",
        source_url: None,
        original: None,
        filename: None,
        options: json!({}),
        size: 0,
        agent_id: s.agent_id.clone().or(r.agent_id.clone()),
        folder_id: s.folder_id.clone().or(r.folder_id.clone()),
        is_public: s.is_public.or(r.is_public).unwrap_or(false),
    };
    match sub {
        "upload-website" | "scrape-website" | "extract-youtube" => {
            let raw = s
                .url
                .as_deref()
                .filter(|u| !u.trim().is_empty())
                .ok_or_else(|| ApiError::validation("data.data.url is required"))?;
            let url = ctx
                .app
                .net
                .check(raw)
                .map_err(|e| ApiError::validation(format!("data.data.url: {e}")))?;
            d.source_url = Some(url.to_string());
            d.name = clean_name(&name.unwrap_or_else(|| default_name(&url)))?;
            match sub {
                "upload-website" => d.doc_type = "url",
                "scrape-website" => {
                    let pages = s.max_pages.unwrap_or(crawl::DEFAULT_MAX_PAGES);
                    let depth = s.max_depth.unwrap_or(crawl::DEFAULT_MAX_DEPTH);
                    if !(1..=crawl::MAX_PAGES_CAP).contains(&pages) {
                        return Err(ApiError::validation(format!(
                            "data.data.max_pages must be between 1 and {}",
                            crawl::MAX_PAGES_CAP
                        )));
                    }
                    if depth > crawl::MAX_DEPTH_CAP {
                        return Err(ApiError::validation(format!(
                            "data.data.max_depth must be between 0 and {}",
                            crawl::MAX_DEPTH_CAP
                        )));
                    }
                    d.doc_type = "website";
                    d.options = json!({"max_pages": pages, "max_depth": depth});
                }
                _ => {
                    if extract::youtube::video_id(raw).is_none() {
                        return Err(ApiError::validation(
                            "data.data.url must be a YouTube video URL (youtube.com/watch?v=…, youtu.be/…)",
                        ));
                    }
                    d.doc_type = "youtube";
                }
            }
        }
        "upload-pdf" | "extract-document" => {
            let filename = s
                .filename
                .as_deref()
                .map(str::trim)
                .filter(|f| !f.is_empty() && f.len() <= 255)
                .ok_or_else(|| {
                    ApiError::validation("data.data.filename is required (at most 255 characters)")
                })?
                .to_string();
            let b64 = s
                .content_base64
                .as_deref()
                .ok_or_else(|| ApiError::validation("data.data.content_base64 is required"))?;
            if b64.len() / 4 * 3 > max + 3 {
                return Err(ApiError::payload_too_large(max));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| {
                    ApiError::validation(format!(
                        "data.data.content_base64 is not valid base64: {e}"
                    ))
                })?;
            file_draft(&mut d, sub, filename, bytes, max)?;
            d.name = clean_name(&name.unwrap_or_else(|| d.filename.clone().unwrap_or_default()))?;
        }
        other => {
            return Err(ApiError::new(
                crate::error::Kind::InvalidAction,
                format!(
                    "unknown create sub-action '{other}'; use create-notes, upload-website, scrape-website, extract-youtube, upload-pdf or extract-document"
                ),
            ));
        }
    }
    Ok(d)
}

/// Fills the file members of a draft, checking size and format.
pub(crate) fn file_draft(
    d: &mut Draft,
    sub: &str,
    filename: String,
    bytes: Vec<u8>,
    max: usize,
) -> ApiResult<()> {
    if bytes.len() > max {
        return Err(ApiError::payload_too_large(max));
    }
    if bytes.is_empty() {
        return Err(ApiError::validation("the uploaded file is empty"));
    }
    let ext = extract::extension(&filename);
    d.doc_type = match sub {
        "upload-pdf" => "pdf_upload",
        _ => match ext.as_deref() {
            Some("pdf") => "pdf_upload",
            Some(e) if extract::DOCUMENT_EXTENSIONS.contains(&e) => "file_upload",
            _ => {
                return Err(ApiError::validation(format!(
                    "unsupported document format '{}'; supported: {}",
                    ext.unwrap_or_default(),
                    extract::DOCUMENT_EXTENSIONS.join(", ")
                )));
            }
        },
    };
    d.size = bytes.len() as i64;
    d.original = Some(bytes);
    d.filename = Some(filename);
    Ok(())
}

/// Stores the original, the record, the genie link and the first pipeline job in one
/// transaction, then wakes the worker.
pub(crate) async fn insert(ctx: &Ctx, mut d: Draft) -> ApiResult<Reply> {
    let agent = d
        .agent_id
        .as_deref()
        .map(|a| parse_uuid(a, "data.agentId"))
        .transpose()?;
    let folder = d
        .folder_id
        .as_deref()
        .filter(|f| !f.trim().is_empty())
        .map(|f| parse_uuid(f, "data.folder_id"))
        .transpose()?;
    let uid = ctx.user_id().to_string();
    let any_owner = ctx.principal.is_admin();
    let store = knowledge::store(&ctx.app);
    if !ctx.app.documents.is_file() && d.original.is_some() {
        // Refused before the upload, so a request that will fail leaves nothing in the
        // bucket (the transaction checks again).
        let (u, a, f) = (uid.clone(), agent.clone(), folder.clone());
        ctx.db()
            .read(move |c| {
                if let Some(a) = &a
                    && docs::owned_genie(c, &u, any_owner, a)?.is_none()
                {
                    return Err(ApiError::agent_not_found());
                }
                check_folder(c, &u, f.as_deref())
            })
            .await?;
    }
    // The original goes to the store before the transaction (an S3 upload must not hold the
    // database writer); a store that cannot take it fails the request with nothing written.
    let staged = match d.original.take() {
        Some(b) => Some(store.stage(b).await?),
        None => None,
    };
    let doc = ctx
        .db()
        .write(move |c| {
            if let Some(a) = &agent
                && docs::owned_genie(c, &uid, any_owner, a)?.is_none()
            {
                return Err(ApiError::agent_not_found());
            }
            check_folder(c, &uid, folder.as_deref())?;
            let hash = match &staged {
                Some(s) => Some(store.commit(s)?),
                None => None,
            };
            let id = docs::insert(
                c,
                &NewDocument {
                    user_id: &uid,
                    name: &d.name,
                    doc_type: d.doc_type,
                    status: "pending_extraction",
                    folder_id: folder.as_deref(),
                    is_public: d.is_public,
                    size_bytes: d.size,
                    source_url: d.source_url.as_deref(),
                    original_hash: hash.as_deref(),
                    filename: d.filename.as_deref(),
                    options: &d.options,
                },
            )?;
            if let Some(a) = &agent {
                docs::link(c, a, &id)?;
            }
            pipeline::enqueue_extract(c, &id)?;
            Ok(docs::get_any(c, &id)?.expect("row just inserted"))
        })
        .await?;
    ctx.app.wake_jobs();
    let scope = Scope {
        user_id: ctx.user_id().to_string(),
        all: false,
    };
    let summary = format!("created {} document '{}'", doc.doc_type, doc.name);
    let id = doc.id.clone();
    Ok(
        Reply::created(json!({"document": record(ctx, doc, &scope).await?}))
            .record(id)
            .summary(summary),
    )
}
