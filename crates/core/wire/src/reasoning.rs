//! How a reasoning model's thinking is told from its answer in a stream (`--reasoning-parser`);
//! the client applies it, the result document records it.

/// How reasoning is told from the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReasoningParser {
    /// `reasoning_content` / `reasoning` fields are reasoning; content is the answer.
    #[default]
    Fields,
    /// As `fields`, and content between `<think>` and `</think>` is reasoning too.
    ThinkTags,
    /// Everything is the answer (TTFO is TTFT).
    None,
}

impl ReasoningParser {
    pub const NAMES: [&'static str; 3] = ["fields", "think-tags", "none"];

    pub fn name(self) -> &'static str {
        match self {
            ReasoningParser::Fields => "fields",
            ReasoningParser::ThinkTags => "think-tags",
            ReasoningParser::None => "none",
        }
    }
}

impl std::str::FromStr for ReasoningParser {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "fields" | "auto" => Ok(ReasoningParser::Fields),
            "think-tags" | "think_tags" => Ok(ReasoningParser::ThinkTags),
            "none" => Ok(ReasoningParser::None),
            other => Err(format!(
                "unknown reasoning parser `{other}`: expected fields (reasoning_content / reasoning), think-tags \
                 (<think>…</think> in the content) or none"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_names() {
        for n in ReasoningParser::NAMES {
            assert_eq!(n.parse::<ReasoningParser>().unwrap().name(), n);
        }
        let e = "tags".parse::<ReasoningParser>().unwrap_err();
        assert!(e.contains("unknown reasoning parser `tags`") && e.contains("think-tags"), "{e}");
    }
}
