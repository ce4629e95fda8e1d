pub mod http_api;
pub mod openai;
