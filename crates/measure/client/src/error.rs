//! Why a client could not be set up or a server not used.

/// A base URL that cannot name a server (each names the URL given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("`{url}` is not a URL: {message}")]
    NotAUrl { url: String, message: String },
    #[error("`{url}`: expected http://HOST:PORT or https://HOST")]
    Scheme { url: String },
    #[error("`{url}`: no host")]
    NoHost { url: String },
}

/// Why a client could not be set up or a server not used.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("the API key contains characters not allowed in an HTTP header")]
    ApiKey,
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("TLS: {0}")]
    Tls(String),
}
