//! Genie operations: provisioning a new genie or a clone (the provider first, then the row,
//! and no orphan on either side when one fails), deleting one, the provider clean-up a
//! deleted genie leaves (run inline, then as the `genie.cleanup` job). The `genies`
//! actions, the marketplace install and the job dispatcher share them; the per-genie lock
//! and the knowledge-base push live below, in `knowledge::agents`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::db;
use crate::db::genies::{self as repo, GenieRow, PhoneRow};
use crate::error::{ApiError, ApiResult};
use crate::events::{self, Event};
use crate::service::genie_versions;
use crate::state::AppState;
use crate::voice::AgentSpec;

/// Job kind that removes a deleted genie's agent and numbers from the provider.
pub const CLEANUP_JOB: &str = "genie.cleanup";

/// The `genie.cleanup` job: releases the numbers, then deletes the agent. Both steps are
/// idempotent, so a retry after a partial success is safe.
pub async fn run_cleanup(app: &AppState, payload: &Value) -> ApiResult<()> {
    // Payloads queued before genies named their provider carry none: the default.
    let voice = app.voice.named(payload["provider"].as_str())?;
    for n in payload["number_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        voice.release_number(n).await?;
    }
    if let Some(a) = payload["agent_id"].as_str() {
        voice.delete_agent(a).await?;
    }
    Ok(())
}

/// Provisions a new genie: its agent (and a phone number when `want_phone`) at the provider
/// first, so that a genie exists only if the provider accepted it, then the row with its
/// number in one transaction. When the row cannot be stored the provider side is removed
/// (or the removal queued). `provider` names a configured provider (the caller checked).
/// Returns the stored row and the genie as `render` made it, which `genie.created`, recorded
/// in the same transaction, carries.
pub async fn provision(
    app: &AppState,
    mut row: GenieRow,
    spec: &AgentSpec,
    want_phone: bool,
    provider: &str,
    render: Render,
) -> ApiResult<(GenieRow, Value)> {
    let voice = app.voice.named(Some(provider))?.clone();
    let provider = voice.name();
    if want_phone && !voice.supports_phone_provisioning() {
        return Err(phone_unsupported(provider));
    }
    let agent_id = voice.create_agent(spec).await?;
    row.external_agent_id = Some(agent_id.clone());
    let mut phone = None;
    if want_phone {
        match voice.provision_number(&agent_id, &row.name).await {
            Ok(p) => phone = Some(p),
            Err(e) => {
                cleanup_or_queue(app, provider, Some(agent_id), vec![]).await;
                return Err(e.into());
            }
        }
    }
    let (r, p) = (row, phone.clone());
    let stored = app
        .db
        .write(move |c| {
            let mut r = r;
            r.sort_order = repo::next_sort_order(c, &r.user_id)?;
            if let Some(slug) = &r.page_slug
                && repo::slug_taken(c, slug, &r.id)?
            {
                return Err(ApiError::conflict(format!(
                    "data.pageSlug '{slug}' is already used by another genie"
                )));
            }
            repo::insert(c, &r)?;
            let cfg = genie_versions::config_of(&r, &[]);
            genie_versions::record(
                c,
                &r.id,
                None,
                &cfg,
                Some(&r.user_id),
                Some("created"),
                true,
            )?;
            crate::db::genie_providers::set_provider(c, &r.id, provider, &r.created_at)?;
            if let Some(p) = p {
                repo::insert_phone(
                    c,
                    &PhoneRow {
                        id: db::new_id(),
                        genie_id: r.id.clone(),
                        number: p.number,
                        external_id: Some(p.external_id),
                        status: "active".into(),
                        created_at: r.created_at.clone(),
                    },
                )?;
            }
            announce_created(c, r, render)
        })
        .await;
    match stored {
        Ok((r, full, created)) => {
            app.bus.emit(created);
            Ok((r, full))
        }
        Err(e) => {
            cleanup_or_queue(
                app,
                provider,
                Some(agent_id),
                phone.into_iter().map(|p| p.external_id).collect(),
            )
            .await;
            Err(e)
        }
    }
}

/// Provisions `row`, a copy of the genie `src_id`, with the same attached documents: the
/// agent at the provider first, then the row and its document links in one transaction;
/// when that fails the agent is removed again (or its removal queued). Returns the row and
/// the genie as `render` made it, which `genie.created` carries, as `provision` does.
pub async fn provision_clone(
    app: &AppState,
    src_id: &str,
    mut row: GenieRow,
    spec: &AgentSpec,
    render: Render,
) -> ApiResult<(GenieRow, Value)> {
    // A clone lives where its original does.
    let voice = crate::knowledge::agents::voice_for(app, src_id).await?;
    let provider = voice.name();
    let agent_id = voice.create_agent(spec).await?;
    row.external_agent_id = Some(agent_id.clone());
    let (r, src_id) = (row, src_id.to_string());
    let stored = app
        .db
        .write(move |c| {
            let mut r = r;
            r.sort_order = repo::next_sort_order(c, &r.user_id)?;
            repo::insert(c, &r)?;
            repo::copy_documents(c, &src_id, &r.id, &r.created_at)?;
            let cfg = genie_versions::config_of(&r, &repo::documents(c, &r.id)?);
            let note = format!("cloned from genie {src_id}");
            genie_versions::record(c, &r.id, None, &cfg, Some(&r.user_id), Some(&note), true)?;
            crate::db::genie_providers::set_provider(c, &r.id, provider, &r.created_at)?;
            announce_created(c, r, render)
        })
        .await;
    match stored {
        Ok((r, full, created)) => {
            app.bus.emit(created);
            Ok((r, full))
        }
        Err(e) => {
            cleanup_or_queue(app, provider, Some(agent_id), vec![]).await;
            Err(e)
        }
    }
}

/// Renders a genie just stored and records `genie.created` with it, in its transaction.
fn announce_created(
    c: &db::sql::Connection,
    r: GenieRow,
    render: Render,
) -> ApiResult<(GenieRow, Value, events::Recorded)> {
    let full = render(c, &r)?;
    let created = events::record(c, Event::new("genie.created", &r.user_id, full.clone()))?;
    Ok((r, full, created))
}

/// Renders genie `id` and records `genie.updated` with it, inside the transaction that
/// changed it; returns the rendering and the event to emit after the commit.
pub fn announce_updated(
    c: &db::sql::Connection,
    id: &str,
    render: Render,
) -> ApiResult<(Value, events::Recorded)> {
    let g = repo::find(c, id)?.ok_or_else(ApiError::agent_not_found)?;
    let full = render(c, &g)?;
    let updated = events::record(c, Event::new("genie.updated", &g.user_id, full.clone()))?;
    Ok((full, updated))
}

/// Deletes a genie the caller may manage (the caller holds its lock): removes its agent
/// and numbers at the provider, then the row; when the provider fails, the row goes anyway
/// and a durable `genie.cleanup` job retries until the provider agrees. Emits
/// `genie.deleted`.
pub async fn delete(app: &AppState, row: &GenieRow) -> ApiResult<()> {
    let id = row.id.clone();
    let (phones, provider) = {
        let id = id.clone();
        app.db
            .read(move |c| {
                Ok((
                    repo::phones(c, &id)?,
                    crate::db::genie_providers::get(c, &id)?.provider,
                ))
            })
            .await?
    };
    let payload = json!({
        "genie_id": id,
        "provider": provider,
        "agent_id": row.external_agent_id,
        "number_ids": phones.iter().filter_map(|p| p.external_id.clone()).collect::<Vec<_>>(),
    });
    let provider = run_cleanup(app, &payload).await;
    let queued = provider.is_err();
    if let Err(e) = &provider {
        tracing::warn!(genie = %id, error = %e, "voice provider clean-up failed; queued for retry");
    }
    let id2 = id.clone();
    let deleted = Event::new(
        "genie.deleted",
        &row.user_id,
        json!({"id": id, "name": row.name}),
    );
    let deleted = app
        .db
        .write(move |c| {
            if !repo::delete(c, &id2)? {
                return Err(ApiError::agent_not_found());
            }
            if queued {
                crate::jobs::enqueue(c, CLEANUP_JOB, &payload, retry_delay(), None)?;
            }
            Ok(events::record(c, deleted)?)
        })
        .await?;
    app.bus.emit(deleted);
    Ok(())
}

/// The refusal of a phone number when the provider cannot provision one.
pub fn phone_unsupported(provider: &str) -> ApiError {
    ApiError::validation(format!(
        "data.attachPhoneNumber: the '{}' voice provider cannot provision phone numbers; numbers are imported into the \
         provider with your own telephony (Twilio or SIP trunk) credentials",
        provider
    ))
}

/// Removes an agent and releases numbers at the provider; if that fails, queues a durable
/// `genie.cleanup` job that retries with backoff until it succeeds.
pub async fn cleanup_or_queue(
    app: &AppState,
    provider: &str,
    agent_id: Option<String>,
    number_ids: Vec<String>,
) {
    let payload = json!({"provider": provider, "agent_id": agent_id, "number_ids": number_ids});
    if let Err(e) = run_cleanup(app, &payload).await {
        tracing::warn!(error = %e, "voice provider clean-up failed; queued for retry");
        let res = app
            .db
            .write(move |c| {
                Ok(crate::jobs::enqueue(
                    c,
                    CLEANUP_JOB,
                    &payload,
                    retry_delay(),
                    None,
                )?)
            })
            .await;
        if let Err(e) = res {
            tracing::error!(error = %e, "could not queue the voice provider clean-up");
        }
    }
}

/// The first retry of a clean-up that just failed inline.
fn retry_delay() -> Duration {
    Duration::from_secs(30)
}

// ---- changing a live genie -----------------------------------------------------------

/// An edit of a genie row that validates as it goes. `Fn`: [`apply`] may make it twice, on
/// a row read again, when the first attempt finds that the provider must hear of it.
pub type Edit = Box<dyn Fn(&mut GenieRow) -> ApiResult<()> + Send>;

/// What [`apply`] changes: the edit of the row, and optionally the document set.
pub struct Changes {
    /// Edits the stored row (validating as it goes); runs under the genie's lock.
    pub edit: Edit,
    /// The genie's new document ids (those still attachable are linked); `None` keeps them.
    pub documents: Option<Vec<String>>,
    /// The version's summary; `None`: the fields that changed.
    pub note: Option<String>,
    /// Record a version even when the configuration did not change (a rollback to live).
    pub always_record: bool,
    /// Drop the genie's draft in the same transaction (publish).
    pub clear_draft: bool,
    /// The summary of the action's audit row, from the saved genie and the version recorded:
    /// given, the row is written in the change's own transaction (`db::activities::claim`).
    pub audit_summary: Option<AuditSummary>,
    /// Renders the changed genie inside the change's transaction (the caller's full object),
    /// instead of the caller reading it back afterwards; the result is `Applied::rendered`,
    /// and `genie.updated` carrying it is recorded in that transaction.
    pub render: Option<Render>,
    /// Events recorded in the change's transaction (before `genie.updated`), from the saved
    /// row and the version recorded.
    pub announce: Option<Announce>,
    /// Who must be able to manage the genie (`db::genies::get_manageable`), checked on the
    /// row the change reads, in its own transaction: no read of its own before the write,
    /// and no window between the check and the change. `None`: the caller checked.
    pub manager: Option<Manager>,
}

/// A user and their role, as `db::genies::get_manageable` takes them.
pub type Manager = (String, db::users::Role);

pub type Announce = Box<dyn FnOnce(&GenieRow, Option<i64>) -> Vec<Event> + Send>;
pub type AuditSummary = Box<dyn FnOnce(&GenieRow, Option<i64>) -> String + Send>;
pub type Render = Box<dyn FnOnce(&db::sql::Connection, &GenieRow) -> ApiResult<Value> + Send>;

impl Changes {
    pub fn edit(f: impl Fn(&mut GenieRow) -> ApiResult<()> + Send + 'static) -> Changes {
        Changes {
            edit: Box::new(f),
            documents: None,
            note: None,
            always_record: false,
            clear_draft: false,
            audit_summary: None,
            render: None,
            announce: None,
            manager: None,
        }
    }
    /// Makes a version's configuration (documents included) the genie's.
    pub fn config(config: Value, note: String) -> Changes {
        let docs = genie_versions::documents_of(&config);
        Changes {
            edit: Box::new(move |g| {
                genie_versions::apply_config(g, &config);
                Ok(())
            }),
            documents: Some(docs),
            note: Some(note),
            always_record: true,
            clear_draft: false,
            audit_summary: None,
            render: None,
            announce: None,
            manager: None,
        }
    }
}

/// The genie after [`apply`], and the version it recorded (none when nothing the genie
/// says or does changed, e.g. a rename).
pub struct Applied {
    pub row: GenieRow,
    pub version: Option<i64>,
    /// What `Changes::render` made, when given.
    pub rendered: Option<Value>,
}

/// Applies a change to the live genie: edits the row, pushes the agent to the voice provider
/// when what it is told changed, then stores the row, its documents and the new version in
/// one transaction. `update`, `publish` and `rollback` call this (and a provider `pull` may).
/// `by` is the acting user; access is the caller's to check first, or `Changes::manager`'s.
///
/// A change the provider need not hear of (the genie has no agent there, or nothing the
/// agent is told changed: a new description, say) is read, edited and stored in one write
/// transaction, holding the genie's lock shared, so concurrent changes of one genie are
/// committed together. Otherwise that transaction writes nothing, and the change starts
/// again under the lock held exclusively: read, edit, push outside any transaction, and a
/// second transaction stores it only if the provider took it.
pub async fn apply(
    app: &AppState,
    by: &str,
    genie_id: &str,
    changes: Changes,
) -> ApiResult<Applied> {
    let Changes {
        edit,
        documents,
        note,
        always_record,
        clear_draft,
        audit_summary,
        render,
        announce,
        manager,
    } = changes;
    let store = Store {
        by: by.to_string(),
        relink: documents.is_some(),
        clear_draft,
        note,
        always_record,
        audit: audit_summary.and_then(|f| db::activities::claim("genies").map(|a| (a, f))),
        render,
        announce,
    };
    let shared = crate::knowledge::agents::share_genie(genie_id).await;
    let id = genie_id.to_string();
    let first = app
        .db
        .write(move |c| {
            let (old, docs, new_docs) =
                read_for_change(c, &id, manager.as_ref(), documents.as_deref())?;
            let mut row = old.clone();
            edit(&mut row)?;
            row.updated_at = db::now();
            // Without a document change both sides have the same knowledge base, so the
            // specs compare without it.
            let told = documents.is_some()
                || serde_json::to_value(agent_spec(&row, Vec::new()))?
                    != serde_json::to_value(agent_spec(&old, Vec::new()))?;
            if told && row.external_agent_id.is_some() {
                return Ok(Step::Push(edit, documents, store, manager));
            }
            let stored = store.run(c, &old, &docs, &row, &new_docs)?;
            Ok(Step::Done(Box::new(row), stored))
        })
        .await?;
    drop(shared);
    let (row, (version, rendered, raised)) = match first {
        Step::Done(row, stored) => (*row, stored),
        Step::Push(edit, documents, store, manager) => {
            push_then_store(app, genie_id, edit, documents, store, manager).await?
        }
    };
    app.bus.emit_all(raised);
    Ok(Applied {
        row,
        version,
        rendered,
    })
}

/// The genie, its documents, and the documents it will have (`documents`: the new ids, of
/// which those still attachable; `None`: the same).
type ForChange = (GenieRow, Vec<repo::AttachedDoc>, Vec<repo::AttachedDoc>);

fn read_for_change(
    c: &db::sql::Connection,
    id: &str,
    manager: Option<&Manager>,
    documents: Option<&[String]>,
) -> ApiResult<ForChange> {
    let g = match manager {
        Some((user, role)) => repo::get_manageable(c, user, *role, id)?,
        None => repo::find(c, id)?,
    };
    let g = g.ok_or_else(ApiError::agent_not_found)?;
    let docs = repo::documents(c, id)?;
    let new_docs = match documents {
        Some(ids) => db::genie_versions::attachable(c, &g.user_id, ids)?,
        None => docs.clone(),
    };
    Ok((g, docs, new_docs))
}

/// What [`apply`]'s first transaction decided.
enum Step {
    /// Stored: the row, and what [`Store::run`] returned.
    Done(Box<GenieRow>, Stored),
    /// Nothing written: the provider must hear of the change first.
    Push(Edit, Option<Vec<String>>, Store, Option<Manager>),
}

/// The version recorded, the rendered genie, and the events to emit after the commit.
type Stored = (Option<i64>, Option<Value>, Vec<events::Recorded>);

/// [`apply`] when the provider must hear of the change, under the genie's lock held
/// exclusively: the genie read again and edited, the agent pushed with its knowledge base on
/// the genie's own platform, then the change stored.
async fn push_then_store(
    app: &AppState,
    genie_id: &str,
    edit: Edit,
    documents: Option<Vec<String>>,
    store: Store,
    manager: Option<Manager>,
) -> ApiResult<(GenieRow, Stored)> {
    let _guard = crate::knowledge::agents::lock_genie(genie_id).await;
    let id = genie_id.to_string();
    // The provider read with the genie rather than by `agents::voice_for`: one trip fewer.
    let ((old, docs, new_docs), provider) = app
        .db
        .read(move |c| {
            let change = read_for_change(c, &id, manager.as_ref(), documents.as_deref())?;
            Ok((change, db::genie_providers::get(c, &id)?.provider))
        })
        .await?;
    let mut row = old.clone();
    edit(&mut row)?;
    row.updated_at = db::now();
    let voice = app.voice.named(provider.as_deref())?.clone();
    let (new_kb, _) = crate::knowledge::agents::kb_for(app, &voice, &new_docs).await?;
    let (old_kb, _) = crate::knowledge::agents::kb_for(app, &voice, &docs).await?;
    let new_spec = agent_spec(&row, new_kb);
    let changed =
        serde_json::to_value(&new_spec)? != serde_json::to_value(agent_spec(&old, old_kb))?;
    if changed && let Some(agent) = &row.external_agent_id {
        voice.update_agent(agent, &new_spec).await?;
    }
    let r = row.clone();
    let stored = app
        .db
        .write(move |c| store.run(c, &old, &docs, &r, &new_docs))
        .await?;
    Ok((row, stored))
}

/// How [`apply`] stores a change, inside the transaction that commits it.
struct Store {
    by: String,
    relink: bool,
    clear_draft: bool,
    note: Option<String>,
    always_record: bool,
    audit: Option<(db::activities::Pending, AuditSummary)>,
    render: Option<Render>,
    announce: Option<Announce>,
}

impl Store {
    /// Saves `r` (edited from `old`, with `new_docs` instead of `docs`), its documents and
    /// its version, the audit row, and records the events.
    fn run(
        self,
        c: &db::sql::Connection,
        old: &GenieRow,
        docs: &[repo::AttachedDoc],
        r: &GenieRow,
        new_docs: &[repo::AttachedDoc],
    ) -> ApiResult<Stored> {
        if let Some(slug) = &r.page_slug
            && repo::slug_taken(c, slug, &r.id)?
        {
            return Err(ApiError::conflict(format!(
                "data.page_slug '{slug}' is already used by another genie"
            )));
        }
        if !repo::save(c, r)? {
            return Err(ApiError::agent_not_found());
        }
        if self.relink {
            let ids: Vec<String> = new_docs.iter().map(|d| d.id.clone()).collect();
            db::genie_versions::set_documents(c, &r.id, &ids, &r.updated_at)?;
        }
        if self.clear_draft {
            db::genie_versions::delete_draft(c, &r.id)?;
        }
        let before = genie_versions::config_of(old, docs);
        let after = genie_versions::config_of(r, new_docs);
        let version = genie_versions::record(
            c,
            &r.id,
            Some(&before),
            &after,
            Some(&self.by),
            self.note.as_deref(),
            self.always_record,
        )?;
        if let Some((a, summary)) = self.audit {
            a.insert(c, Some(&r.id), &summary(r, version))?;
        }
        let rendered = self.render.map(|f| f(c, r)).transpose()?;
        let mut raised = Vec::new();
        for e in self.announce.map(|f| f(r, version)).unwrap_or_default() {
            raised.push(events::record(c, e)?);
        }
        if let Some(v) = &rendered {
            let e = Event::new("genie.updated", &r.user_id, v.clone());
            raised.push(events::record(c, e)?);
        }
        Ok((version, rendered, raised))
    }
}

/// What the voice provider is told about this genie (kept beside the versions, which
/// build it too, so the two modules do not import each other).
pub use super::genie_versions::agent_spec;
