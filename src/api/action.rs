//! The action tables. Every resource declares its actions once, in a `pub const RESOURCE`
//! next to its handlers: the action's name, who may call it, whether it takes an `id`, the
//! typed request of its `data`, the errors beyond the common ones it can answer, and the
//! handler. Everything else is derived from these tables: [`super::dispatch`] (unknown
//! actions, the consumer read-only gate, the audit row of every write), the REST adapter's
//! list action, and the OpenAPI document (`http/openapi.rs` keeps no list of its own).

use std::future::Future;
use std::pin::Pin;

use schemars::generate::SchemaGenerator;
use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

use super::{ActionRequest, Ctx, Reply};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};

/// Who may call an action. Only writes are audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone signed in; what they see is scoped by the handler.
    Read,
    /// Users and admins; consumers are read-only.
    Write,
    /// A write consumers may make too (their own profile).
    ConsumerWrite,
}

impl Access {
    pub fn writes(self) -> bool {
        self != Access::Read
    }

    /// The role gate, before the handler runs; ownership is the handler's to check.
    pub fn check(self, principal: &Principal) -> ApiResult<()> {
        if self == Access::Write && !principal.can_write() {
            return Err(ApiError::forbidden("consumers have read-only access"));
        }
        Ok(())
    }
}

/// Whether an action takes the envelope's `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id {
    No,
    Required,
    Optional,
}

/// Describes an action's `data` in the OpenAPI document.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The boxed future of one handler call.
pub type Pending<'a> = Pin<Box<dyn Future<Output = ApiResult<Reply>> + Send + 'a>>;

/// A handler: `async fn(&Ctx, &ActionRequest) -> ApiResult<Reply>`, boxed by [`handler!`].
pub type Handler = for<'a> fn(&'a Ctx, &'a ActionRequest) -> Pending<'a>;

/// The schema of a typed request, for [`Action::data`].
pub fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// One action of one resource.
#[derive(Clone, Copy)]
pub struct Action {
    pub name: &'static str,
    pub access: Access,
    pub id: Id,
    /// The schema of `data`; `None`: the action reads no `data` members.
    pub data: Option<SchemaFn>,
    /// May answer 409 (a uniqueness or state rule).
    pub conflict: bool,
    /// May answer 502 (it calls a configured provider or a remote address).
    pub upstream: bool,
    /// May answer 503 (it writes to the document store, which may be unreachable).
    pub unavailable: bool,
    pub handler: Handler,
}

impl Action {
    pub const fn read(name: &'static str, handler: Handler) -> Action {
        Action::new(name, Access::Read, handler)
    }
    pub const fn write(name: &'static str, handler: Handler) -> Action {
        Action::new(name, Access::Write, handler)
    }
    pub const fn new(name: &'static str, access: Access, handler: Handler) -> Action {
        Action {
            name,
            access,
            id: Id::No,
            data: None,
            conflict: false,
            upstream: false,
            unavailable: false,
            handler,
        }
    }
    /// The action needs the envelope's `id`.
    pub const fn id(self) -> Action {
        Action {
            id: Id::Required,
            ..self
        }
    }
    /// The action reads the envelope's `id` when there is one.
    pub const fn optional_id(self) -> Action {
        Action {
            id: Id::Optional,
            ..self
        }
    }
    pub const fn data(self, schema: SchemaFn) -> Action {
        Action {
            data: Some(schema),
            ..self
        }
    }
    pub const fn conflict(self) -> Action {
        Action {
            conflict: true,
            ..self
        }
    }
    pub const fn upstream(self) -> Action {
        Action {
            upstream: true,
            ..self
        }
    }
    pub const fn unavailable(self) -> Action {
        Action {
            unavailable: true,
            ..self
        }
    }
}

/// One resource: its envelope name, the action `GET /v1/{resource}` runs, and its actions.
pub struct Resource {
    pub name: &'static str,
    pub list_action: &'static str,
    pub actions: &'static [Action],
}

impl Resource {
    pub fn action(&self, name: &str) -> Option<&'static Action> {
        self.actions.iter().find(|a| a.name == name)
    }
}

/// Turns `async fn(&Ctx, &ActionRequest) -> ApiResult<Reply>` into a table [`Handler`].
macro_rules! handler {
    ($f:path) => {{
        fn call<'a>(
            ctx: &'a $crate::api::Ctx,
            req: &'a $crate::api::ActionRequest,
        ) -> $crate::api::action::Pending<'a> {
            Box::pin($f(ctx, req))
        }
        call as $crate::api::action::Handler
    }};
}
pub(crate) use handler;

/// Registers `schema` as the component `name` and refers to it, so the envelope and the REST
/// body share one model; for requests written by hand where serde's shape (double options)
/// is more than schemars can describe.
pub fn named(g: &mut SchemaGenerator, name: &str, schema: Value) -> Schema {
    g.definitions_mut().insert(name.to_string(), schema);
    literal(json!({"$ref": format!("#/components/schemas/{name}")}))
}

fn literal(v: Value) -> Schema {
    Schema::try_from(v).expect("a literal schema is an object")
}

/// `reorder`'s request (genies, genie groups): record id to position.
pub fn sort_request(g: &mut SchemaGenerator) -> Schema {
    named(
        g,
        "SortRequest",
        json!({"type": "object", "required": ["sort"], "properties": {
            "sort": {"type": "object", "description": "Record id → zero-based position",
                     "additionalProperties": {"type": "integer", "minimum": 0}},
        }}),
    )
}
