//! Conversation analysis: a summary, the caller's intent and sentiment, and the contact
//! details mentioned (name, email, phone, budget, timeline). With an OpenAI-compatible
//! endpoint configured the model does it (asked for one JSON object); without one, or when
//! the model's answer is unusable, deterministic extraction does (regular expressions and
//! keyword lists). The result says which method produced it.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::llm::{ChatRequest, Llm, Message};
use crate::voice::Turn;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Contact {
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub budget: Option<String>,
    pub timeline: Option<String>,
}

impl Contact {
    /// Whether anything identifies a person to follow up with.
    pub fn reachable(&self) -> bool {
        self.name.is_some() || self.email.is_some() || self.phone.is_some()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// `llm` or `deterministic`.
    pub method: &'static str,
    pub summary: String,
    /// `purchase`, `booking`, `support`, `complaint`, `information` or `other` (a model may
    /// name another intent; it is kept as given, lower-case).
    pub intent: String,
    /// `positive`, `neutral` or `negative`.
    pub sentiment: String,
    pub contact: Contact,
    /// The model that answered (`llm` method).
    pub model: Option<String>,
    /// Why the model's answer was not used, when the method fell back.
    pub llm_error: Option<String>,
    pub analyzed_at: String,
}

/// What an analysis looks at.
pub struct Input<'a> {
    pub channel: &'a str,
    pub duration_seconds: i64,
    pub transcript: &'a [Turn],
    /// A summary the voice platform already made, if any.
    pub provider_summary: Option<&'a str>,
}

/// Uses the LLM when given, falling back to deterministic extraction on any failure.
pub async fn analyze(llm: Option<&Llm>, input: &Input<'_>) -> Analysis {
    match llm {
        None => deterministic(input),
        Some(llm) => match with_llm(llm, input).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "LLM analysis unusable; falling back to deterministic extraction");
                Analysis {
                    llm_error: Some(e),
                    ..deterministic(input)
                }
            }
        },
    }
}

pub const SYSTEM_PROMPT: &str = "You analyse transcripts of conversations between a voice AI agent and a caller. \
Reply with one JSON object and nothing else, with exactly these keys: \
\"summary\" (string, at most three sentences), \
\"intent\" (one of \"purchase\", \"booking\", \"support\", \"complaint\", \"information\", \"other\"), \
\"sentiment\" (one of \"positive\", \"neutral\", \"negative\"), \
\"contact\" (object with keys \"name\", \"email\", \"phone\", \"budget\", \"timeline\"; each a string the caller stated, or null).";

pub fn transcript_text(turns: &[Turn]) -> String {
    turns
        .iter()
        .map(|t| format!("{}: {}", t.role, t.message))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn with_llm(llm: &Llm, input: &Input<'_>) -> Result<Analysis, String> {
    let req = ChatRequest {
        model: llm.default_model.clone(),
        messages: vec![
            Message::new("system", SYSTEM_PROMPT),
            Message::new(
                "user",
                format!(
                    "Channel: {}\nDuration: {} s\nTranscript:\n{}",
                    input.channel,
                    input.duration_seconds,
                    transcript_text(input.transcript)
                ),
            ),
        ],
        tools: None,
        temperature: Some(0.0),
        max_tokens: Some(800),
    };
    let resp = llm.chat(&req).await?;
    let text = resp.message.content.unwrap_or_default();
    parse_llm_answer(&text).map(|(summary, intent, sentiment, contact)| Analysis {
        method: "llm",
        summary,
        intent,
        sentiment,
        contact,
        model: Some(req.model),
        llm_error: None,
        analyzed_at: crate::db::now(),
    })
}

/// Reads the model's JSON object (tolerating code fences and text around it).
fn parse_llm_answer(text: &str) -> Result<(String, String, String, Contact), String> {
    let (start, end) = (text.find('{'), text.rfind('}'));
    let obj: Value = match (start, end) {
        (Some(s), Some(e)) if e > s => serde_json::from_str(&text[s..=e])
            .map_err(|e| format!("the model's answer is not JSON: {e}"))?,
        _ => return Err("the model's answer holds no JSON object".into()),
    };
    let summary = obj["summary"]
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("the model's answer has no summary")?;
    let intent = obj["intent"]
        .as_str()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "other".into());
    let sentiment = match obj["sentiment"].as_str().map(|s| s.trim().to_lowercase()) {
        Some(s) if ["positive", "neutral", "negative"].contains(&s.as_str()) => s,
        _ => "neutral".into(),
    };
    let field = |k: &str| -> Option<String> {
        match &obj["contact"][k] {
            Value::String(s) if !s.trim().is_empty() && !s.trim().eq_ignore_ascii_case("null") => {
                Some(s.trim().to_string())
            }
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let contact = Contact {
        name: field("name"),
        email: field("email").filter(|e| e.contains('@')),
        phone: field("phone"),
        budget: field("budget"),
        timeline: field("timeline"),
    };
    Ok((summary.to_string(), intent, sentiment, contact))
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}").unwrap()
});
static PHONE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\+?\(?\d[\d\s().-]{5,}\d").unwrap());
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:(?i:my name is|my name's|this is|call me|i am|i'm)\s+)([A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)?)")
        .unwrap()
});
static BUDGET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:[$€£]\s?\d[\d,]*(?:\.\d+)?\s?(?:k|m|thousand|million)?\b|\b\d[\d,]*(?:\.\d+)?\s?(?:k|thousand|million)?\s?(?:dollars|euros|pounds|usd|eur|gbp)\b|\bbudget\b[^.?!\d]{0,20}\d[\d,]*(?:\.\d+)?\s?(?:k|thousand|million)?)",
    )
    .unwrap()
});
static TIMELINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(asap|as soon as possible|immediately|right away|today|tomorrow|this week|next week|this month|next month|this quarter|next quarter|this year|next year|(?:within|in) (?:a|one|two|three|four|six|\d+) (?:days?|weeks?|months?|years?)|by (?:the end of )?(?:january|february|march|april|may|june|july|august|september|october|november|december|spring|summer|autumn|fall|winter|next \w+|the end of \w+))\b",
    )
    .unwrap()
});

/// The caller's words (turns not spoken by the agent); all turns when roles are unknown.
fn caller_text(turns: &[Turn]) -> String {
    let user: Vec<&str> = turns
        .iter()
        .filter(|t| !matches!(t.role.as_str(), "agent" | "assistant"))
        .map(|t| t.message.as_str())
        .collect();
    if user.is_empty() {
        turns
            .iter()
            .map(|t| t.message.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        user.join("\n")
    }
}

const NOT_NAMES: &[&str] = &[
    "Interested",
    "Looking",
    "Calling",
    "Not",
    "Just",
    "Here",
    "Fine",
    "Good",
    "Sorry",
    "Happy",
    "Trying",
];

pub fn extract_contact(turns: &[Turn]) -> Contact {
    let text = caller_text(turns);
    let email = EMAIL
        .find(&text)
        .map(|m| m.as_str().trim_end_matches('.').to_lowercase());
    let phone = PHONE.find_iter(&text).find_map(|m| {
        let raw = m.as_str().trim();
        let digits: String = raw.chars().filter(|c| c.is_ascii_digit()).collect();
        (7..=15).contains(&digits.len()).then(|| {
            if raw.starts_with('+') {
                format!("+{digits}")
            } else {
                digits
            }
        })
    });
    let name = NAME.captures_iter(&text).find_map(|c| {
        let n = c.get(1)?.as_str().trim();
        let first = n.split_whitespace().next().unwrap_or("");
        (!NOT_NAMES.contains(&first)).then(|| n.to_string())
    });
    let budget = BUDGET.find(&text).map(|m| {
        let s = m.as_str().trim();
        // "budget is about 5000" → "5000"
        match s.to_lowercase().starts_with("budget") {
            true => s[s
                .find(|c: char| c.is_ascii_digit() || "$€£".contains(c))
                .unwrap_or(0)..]
                .trim()
                .to_string(),
            false => s.to_string(),
        }
    });
    let timeline = TIMELINE.find(&text).map(|m| m.as_str().to_lowercase());
    Contact {
        name,
        email,
        phone,
        budget,
        timeline,
    }
}

fn has_any(text: &str, words: &[&str]) -> usize {
    words.iter().filter(|w| text.contains(*w)).count()
}

pub fn intent(text: &str) -> &'static str {
    let t = text.to_lowercase();
    let scores = [
        (
            "complaint",
            has_any(
                &t,
                &[
                    "complain",
                    "complaint",
                    "refund",
                    "unacceptable",
                    "terrible",
                    "disappointed",
                    "cancel my",
                ],
            ),
        ),
        (
            "support",
            has_any(
                &t,
                &[
                    "problem",
                    "issue",
                    "not working",
                    "broken",
                    "error",
                    "help with",
                    "doesn't work",
                    "does not work",
                    "fix",
                ],
            ),
        ),
        (
            "booking",
            has_any(
                &t,
                &[
                    "appointment",
                    "book",
                    "schedule",
                    "reservation",
                    "reserve",
                    "meeting",
                    "demo",
                ],
            ),
        ),
        (
            "purchase",
            has_any(
                &t,
                &[
                    "buy",
                    "purchase",
                    "price",
                    "pricing",
                    "quote",
                    "cost",
                    "order",
                    "interested in",
                    "budget",
                ],
            ),
        ),
        (
            "information",
            has_any(
                &t,
                &[
                    "question",
                    "information",
                    "wondering",
                    "how does",
                    "what is",
                    "tell me",
                    "do you",
                ],
            ),
        ),
    ];
    scores
        .iter()
        .filter(|(_, n)| *n > 0)
        .max_by_key(|(_, n)| *n)
        .map(|(k, _)| *k)
        .unwrap_or("other")
}

pub fn sentiment(text: &str) -> &'static str {
    let t = text.to_lowercase();
    let pos = has_any(
        &t,
        &[
            "thank",
            "great",
            "perfect",
            "excellent",
            "happy",
            "love",
            "wonderful",
            "awesome",
            "helpful",
            "good",
        ],
    );
    let neg = has_any(
        &t,
        &[
            "angry",
            "terrible",
            "awful",
            "bad",
            "disappointed",
            "frustrat",
            "annoy",
            "unacceptable",
            "worst",
            "upset",
            "complain",
        ],
    );
    match pos.cmp(&neg) {
        std::cmp::Ordering::Greater => "positive",
        std::cmp::Ordering::Less => "negative",
        std::cmp::Ordering::Equal => "neutral",
    }
}

pub fn deterministic(input: &Input<'_>) -> Analysis {
    let caller = caller_text(input.transcript);
    let contact = extract_contact(input.transcript);
    let intent = intent(&caller);
    let summary = match input
        .provider_summary
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        Some(s) => s.to_string(),
        None => {
            let first: String = input
                .transcript
                .iter()
                .find(|t| !matches!(t.role.as_str(), "agent" | "assistant"))
                .map(|t| t.message.chars().take(200).collect())
                .unwrap_or_default();
            let mut s = format!(
                "{} conversation of {} s with {} turns; intent: {intent}.",
                input.channel,
                input.duration_seconds,
                input.transcript.len()
            );
            if !first.is_empty() {
                s.push_str(&format!(" The caller opened with: \"{first}\""));
            }
            if let Some(n) = &contact.name {
                s.push_str(&format!(" Caller: {n}."));
            }
            s
        }
    };
    Analysis {
        method: "deterministic",
        summary,
        intent: intent.into(),
        sentiment: sentiment(&caller).into(),
        contact,
        model: None,
        llm_error: None,
        analyzed_at: crate::db::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: &str, m: &str) -> Turn {
        Turn {
            role: role.into(),
            message: m.into(),
            time_in_call_secs: 0.0,
        }
    }

    #[test]
    fn extracts_contact_details() {
        let t = vec![
            turn("agent", "Hello, this is Acme. How can I help?"),
            turn(
                "user",
                "Hi, my name is Jane Doe and I'm interested in a quote.",
            ),
            turn(
                "user",
                "Reach me at Jane.Doe@Example.com or +1 (555) 010-0199. Our budget is about $5,000 and we need it next month.",
            ),
        ];
        let c = extract_contact(&t);
        assert_eq!(c.name.as_deref(), Some("Jane Doe"));
        assert_eq!(c.email.as_deref(), Some("jane.doe@example.com"));
        assert_eq!(c.phone.as_deref(), Some("+15550100199"));
        assert_eq!(c.budget.as_deref(), Some("$5,000"));
        assert_eq!(c.timeline.as_deref(), Some("next month"));
        assert_eq!(intent(&caller_text(&t)), "purchase");
    }

    #[test]
    fn tolerates_fenced_json_and_rejects_garbage() {
        let ok = parse_llm_answer("```json\n{\"summary\":\"S\",\"intent\":\"Booking\",\"sentiment\":\"weird\",\"contact\":{\"name\":\"A\",\"email\":\"nope\"}}\n```").unwrap();
        assert_eq!(
            (ok.0.as_str(), ok.1.as_str(), ok.2.as_str()),
            ("S", "booking", "neutral")
        );
        assert_eq!(ok.3.name.as_deref(), Some("A"));
        assert_eq!(ok.3.email, None);
        assert!(parse_llm_answer("I cannot do that").is_err());
        assert!(parse_llm_answer("{\"intent\":\"x\"}").is_err());
    }
}
