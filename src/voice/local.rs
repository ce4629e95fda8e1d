//! The embedded voice provider (placeholder until the genies issue lands its full version).

use async_trait::async_trait;

use super::*;

#[derive(Default)]
pub struct LocalProvider;

fn local_id(prefix: &str) -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    format!("{prefix}{}", &id[id.len() - (20 - prefix.len())..])
}

#[async_trait]
impl VoiceProvider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }
    async fn create_agent(&self, _spec: &AgentSpec) -> ProviderResult<String> {
        Ok(local_id("agent_"))
    }
    async fn update_agent(&self, _agent_id: &str, _spec: &AgentSpec) -> ProviderResult<()> {
        Ok(())
    }
    async fn delete_agent(&self, _agent_id: &str) -> ProviderResult<()> {
        Ok(())
    }
    async fn set_agent_documents(&self, _agent_id: &str, _docs: &[KbDocRef]) -> ProviderResult<()> {
        Ok(())
    }
    async fn create_document(&self, _name: &str, _text: &str) -> ProviderResult<String> {
        Ok(local_id("kb"))
    }
    async fn delete_document(&self, _doc_id: &str) -> ProviderResult<()> {
        Ok(())
    }
    async fn provision_number(
        &self,
        _agent_id: &str,
        _label: &str,
    ) -> ProviderResult<ProvisionedNumber> {
        Err(ProviderError::new("phone numbers are not available yet"))
    }
    async fn release_number(&self, _external_id: &str) -> ProviderResult<()> {
        Ok(())
    }
    async fn list_voices(&self) -> ProviderResult<Vec<Voice>> {
        Ok(vec![])
    }
    async fn list_conversations(
        &self,
        _agent_id: &str,
        _cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage> {
        Ok(ConversationPage {
            conversations: vec![],
            next_cursor: None,
        })
    }
    async fn get_conversation(&self, conversation_id: &str) -> ProviderResult<ConversationDetail> {
        Err(ProviderError {
            message: format!("conversation {conversation_id} not found"),
            status: Some(404),
        })
    }
}
