//! The `worker-genies` resource: background LLM agents (`crud.rs`), their runs (`runs.rs`:
//! `run`, `runs`, `cancel`) and the encrypted credentials they use (`credentials.rs`). The
//! operations are `service::worker_genies`; triggers and the executor live in
//! `crate::workers`.

mod credentials;
mod crud;
mod runs;

use super::action::{Action, Resource, handler, schema};

/// Every `worker-genies` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "worker-genies",
    list_action: "list",
    actions: &[
        Action::read("all", handler!(crud::list)),
        Action::read("list", handler!(crud::list)),
        Action::read("get", handler!(crud::get)).id(),
        Action::write("create", handler!(crud::create))
            .data(schema::<crud::GenieInput>)
            .conflict(),
        Action::write("update", handler!(crud::update))
            .id()
            .conflict(),
        Action::write("delete", handler!(crud::delete)).id(),
        Action::write("run", handler!(runs::run)).id(),
        Action::read("runs", handler!(runs::runs)).optional_id(),
        Action::write("cancel", handler!(runs::cancel))
            .id()
            .conflict(),
        Action::write("store-credential", handler!(credentials::store))
            .data(schema::<credentials::StoreInput>)
            .conflict(),
        Action::read("list-credentials", handler!(credentials::list)),
        Action::write("delete-credential", handler!(credentials::delete)).id(),
        Action::write("test-credential", handler!(credentials::test))
            .data(schema::<credentials::TestInput>)
            .upstream(),
    ],
};
