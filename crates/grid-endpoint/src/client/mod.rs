//! Clients: of the `grid-endpoint/1` protocol ([`endpoint`]) and of stock
//! OpenAI-compatible servers in the direct mode ([`direct`]), over a shared HTTP layer
//! ([`http`]).

pub mod direct;
pub mod endpoint;
pub mod http;
pub mod openai;

pub use direct::{
    ConstraintStyle, Counters, DirectClient, DirectConfig, Finish, GreedyOutput, Lookahead,
};
pub use endpoint::{
    ClientConfig, ClientStats, EndpointClient, Mask, Sampled, ServedVocabulary, StepInput,
};
pub use http::{ApiKey, HttpConfig};
