//! RocketMQ's remoting protocol (spec section 9). Filled by the config-sync work.

/// Errors of the remoting layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemotingError {
    #[error("remoting I/O error with {peer}: {source}")]
    Io {
        peer: String,
        #[source]
        source: std::io::Error,
    },
}
