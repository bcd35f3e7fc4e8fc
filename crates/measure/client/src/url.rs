//! A server's address as `--url` gives it, and the URI of every request made of it.
//!
//! `http://h:p`, `http://h:p/`, `http://h:p/v1` and `http://h:p/v1/chat/completions` all name the
//! same server, whose OpenAI paths attach under `/v1`. An endpoint given whole without `/v1`
//! (Azure OpenAI's `https://host/openai/deployments/D/chat/completions`) is used as it is: its
//! paths attach where that endpoint's do. A query string (Azure's `?api-version=…`) is kept on
//! every request, the `/models` probe included; the API is taken from the path before it.

use goodput_wire::Api;

use crate::error::UrlError;

/// A parsed server address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerUrl {
    /// `scheme://authority` plus any path prefix, without `/v1` (server-level paths such as
    /// `/metrics` attach here).
    pub base: String,
    /// Where the API paths (`/completions`, `/chat/completions`, `/models`) attach: `base/v1`, or
    /// the prefix of an endpoint given whole without `/v1`.
    pub root: String,
    /// The query, without its `?`, kept on every API request.
    pub query: Option<String>,
    /// The endpoint the URL named whole, if it did.
    pub named: Option<Api>,
}

impl ServerUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let given = url.trim();
        let no_fragment = given.split('#').next().unwrap_or_default();
        let (path, query) = match no_fragment.split_once('?') {
            Some((p, q)) => (p, (!q.is_empty()).then(|| q.to_string())),
            None => (no_fragment, None),
        };
        let path = path.trim_end_matches('/');
        let named = [Api::Chat, Api::Completions].into_iter().find(|a| path.ends_with(a.suffix()));
        let rest = named.map_or(path, |a| &path[..path.len() - a.suffix().len()]);
        let (base, root) = match (rest.strip_suffix("/v1"), named) {
            (Some(b), _) => (b.to_string(), rest.to_string()),
            // an endpoint given whole without /v1: its own prefix
            (None, Some(_)) => (rest.to_string(), rest.to_string()),
            (None, None) => (rest.to_string(), format!("{rest}/v1")),
        };
        let uri: http::Uri = base
            .parse()
            .map_err(|e: http::uri::InvalidUri| UrlError::NotAUrl { url: given.to_string(), message: e.to_string() })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(UrlError::Scheme { url: given.to_string() });
        }
        if uri.authority().is_none() {
            return Err(UrlError::NoHost { url: given.to_string() });
        }
        if let Some(q) = &query
            && format!("{base}?{q}").parse::<http::Uri>().is_err()
        {
            return Err(UrlError::NotAUrl { url: given.to_string(), message: format!("the query `{q}` is not valid") });
        }
        Ok(ServerUrl { base, root, query, named })
    }

    /// The one string that stands for this address in a plan (and parses back to it): the base
    /// with its query, or, for an endpoint given whole without `/v1`, that endpoint with its query.
    pub fn canonical(&self) -> String {
        let q = self.query.as_ref().map_or(String::new(), |q| format!("?{q}"));
        if self.root == format!("{}/v1", self.base) {
            format!("{}{q}", self.base)
        } else {
            format!("{}{}{q}", self.root, self.named.unwrap_or_default().suffix())
        }
    }

    /// `suffix` (`/completions`, `/models`, …) under the API root, with the query.
    pub fn api_path(&self, suffix: &str) -> String {
        match &self.query {
            Some(q) => format!("{}{suffix}?{q}", self.root),
            None => format!("{}{suffix}", self.root),
        }
    }

    /// The URI of an API's endpoint.
    pub fn endpoint(&self, api: Api) -> String {
        self.api_path(api.suffix())
    }

    /// The model list (`GET …/models`), beside the endpoints.
    pub fn models(&self) -> String {
        self.api_path("/models")
    }

    /// The server's Prometheus metrics: `/metrics` at the base, without the API's query.
    pub fn metrics(&self) -> String {
        format!("{}/metrics", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(u: &str) -> ServerUrl {
        ServerUrl::parse(u).unwrap()
    }

    #[test]
    fn the_usual_forms_name_one_server() {
        for u in [
            "http://h:8000",
            "http://h:8000/",
            "http://h:8000/v1",
            "http://h:8000/v1/",
            "http://h:8000/v1/completions",
            " http://h:8000/v1/chat/completions/ ",
        ] {
            let s = parsed(u);
            assert_eq!(
                (s.base.as_str(), s.root.as_str(), s.query.as_deref()),
                ("http://h:8000", "http://h:8000/v1", None)
            );
            assert_eq!(s.canonical(), "http://h:8000");
            assert_eq!(s.endpoint(Api::Chat), "http://h:8000/v1/chat/completions");
            assert_eq!(s.models(), "http://h:8000/v1/models");
        }
        assert_eq!(parsed("http://h/v1/chat/completions").named, Some(Api::Chat));
        assert_eq!(parsed("http://h/v1/completions").named, Some(Api::Completions));
        assert_eq!(parsed("http://h/proxy").endpoint(Api::Completions), "http://h/proxy/v1/completions");
    }

    #[test]
    fn azure_openai_keeps_its_path_and_query() {
        let u = "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-02-01";
        let s = parsed(u);
        assert_eq!(s.named, Some(Api::Chat));
        assert_eq!(s.query.as_deref(), Some("api-version=2024-02-01"));
        assert_eq!(s.endpoint(Api::Chat), u);
        assert_eq!(s.models(), "https://res.openai.azure.com/openai/deployments/gpt4o/models?api-version=2024-02-01");
        assert_eq!(s.metrics(), "https://res.openai.azure.com/openai/deployments/gpt4o/metrics");
        // the canonical form parses back to the same address
        assert_eq!(s.canonical(), u);
        assert_eq!(parsed(&s.canonical()), s);
    }

    #[test]
    fn a_query_on_a_v1_server_stays_on_every_request() {
        let s = parsed("http://h:8000/v1/completions?tenant=a&x=1#frag");
        assert_eq!(s.endpoint(Api::Completions), "http://h:8000/v1/completions?tenant=a&x=1");
        assert_eq!(s.models(), "http://h:8000/v1/models?tenant=a&x=1");
        assert_eq!(s.canonical(), "http://h:8000?tenant=a&x=1");
        assert_eq!(parsed(&s.canonical()).endpoint(Api::Chat), "http://h:8000/v1/chat/completions?tenant=a&x=1");
    }

    #[test]
    fn what_is_not_a_server_is_refused() {
        assert!(matches!(ServerUrl::parse("ftp://h"), Err(UrlError::Scheme { .. })));
        assert!(matches!(ServerUrl::parse("h:8000"), Err(UrlError::Scheme { .. } | UrlError::NotAUrl { .. })));
        assert!(ServerUrl::parse("http://h/x?a b").is_err());
    }
}
