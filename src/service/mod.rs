//! The domain layer: the product's operations, called by the API actions and by code with
//! no HTTP request behind it (the job dispatcher, the provider's webhooks, the document
//! pipeline, the public page). They take plain inputs and the application state, never a
//! request or a `Ctx`, and import neither `api` nor `http`. Resources move here one at a
//! time; until then some operations still live in their `api/` action.

pub mod accounts;
pub mod analytics;
pub mod api_keys;
pub mod calls;
pub mod campaign_calls;
pub mod campaigns;
pub mod conversation_figures;
pub mod conversations;
pub mod documents;
pub mod drift;
pub mod genie_tests;
pub mod genie_tools;
pub mod genie_versions;
pub mod genies;
pub mod leads;
pub mod marketplace;
pub mod moving;
pub mod page_chat;
pub mod qr_codes;
pub mod teams;
pub mod voice_collections;
pub mod voices;
pub mod webhooks;
pub mod worker_genies;
