//! `grid-endpoint`: the reference model endpoint of grid_pg, and a probe of endpoints.
//!
//! ```text
//! grid-endpoint serve --backend mock --mock scripted --script demo.json \
//!     --tokenizer path/to/tokenizer --listen 127.0.0.1:8077
//! grid-endpoint serve --backend vllm --vllm-url http://gpu:8000 --model Qwen/Qwen2.5-7B \
//!     --tokenizer path/to/tokenizer --listen 0.0.0.0:8077
//! grid-endpoint serve --backend llama --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
//!     --listen 127.0.0.1:8077                       # built with --features llama
//! grid-endpoint vocabulary --url http://127.0.0.1:8077
//! grid-endpoint fingerprint --tokenizer path/to/tokenizer
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use grid_endpoint::backend::forward::{ForwardConfig, ForwardMock, HashedForward};
use grid_endpoint::backend::mock::{AdversarialMock, ScriptedMock};
use grid_endpoint::backend::script::Script;
use grid_endpoint::backend::vllm::{VllmBackend, VllmConfig};
use grid_endpoint::client::{ApiKey, ClientConfig, EndpointClient, HttpConfig};
use grid_endpoint::{Backend, Server, ServerConfig};
use grid_vocab::Vocabulary;

#[derive(Parser)]
#[command(name = "grid-endpoint", version, about = "The grid_pg model endpoint")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the grid-endpoint/1 protocol.
    Serve(Box<ServeArgs>),
    /// Fetch an endpoint's vocabulary and print its summary.
    Vocabulary {
        /// The endpoint, e.g. http://127.0.0.1:8077.
        #[arg(long)]
        url: String,
        /// Bearer token of the endpoint.
        #[arg(long, env = "GRID_ENDPOINT_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
    },
    /// Print the fingerprint of a tokenizer as an endpoint would serve it.
    Fingerprint {
        /// A tokenizer directory or file (see grid_vocab::Vocabulary::load).
        #[arg(long)]
        tokenizer: PathBuf,
        /// Use this id as EOS.
        #[arg(long)]
        eos: Option<u32>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendKind {
    Mock,
    Vllm,
    /// A GGUF model run in process by llama.cpp (needs the `llama` feature).
    Llama,
}

#[derive(Clone, Copy, ValueEnum)]
enum MockKind {
    Scripted,
    Adversarial,
    /// Logits from a seeded hash after a sleep of --forward-ms, pipelined like llama.
    Forward,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Which backend samples.
    #[arg(long, value_enum)]
    backend: BackendKind,
    /// Which mock, with --backend mock.
    #[arg(long, value_enum, default_value = "scripted")]
    mock: MockKind,
    /// The scripted mock's script (JSON: {"entries":[{"match":…,"sql":…}]}).
    #[arg(long)]
    script: Option<PathBuf>,
    /// The model's tokenizer (directory or file), or `builtin` for the mocks' built-in
    /// vocabulary (bytes, SQL words, EOS). Not with --backend llama (the GGUF has it).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Use this id as EOS (e.g. <|im_end|> of a chat model; --backend llama defaults to
    /// the model's end of turn).
    #[arg(long)]
    eos: Option<u32>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8077")]
    listen: SocketAddr,
    /// The vLLM server root, with --backend vllm.
    #[arg(long)]
    vllm_url: Option<String>,
    /// The vLLM served model name, with --backend vllm; the GGUF file, with --backend
    /// llama (see scripts/model.sh).
    #[arg(long)]
    model: Option<String>,
    /// llama: CPU threads. Keep 1 on a 2-core machine: with 2 threads and the other core
    /// busy, generation collapses.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// llama: KV cache cells shared by all generations and kept prompts (default: the
    /// model's training context, at most 16384).
    #[arg(long)]
    ctx: Option<u32>,
    /// llama: generations holding a KV sequence at once (the least recently used idle
    /// one is evicted for a new one; it is recomputed if it comes back); the forward
    /// mock: generations holding their last logits row.
    #[arg(long, default_value_t = 64)]
    max_generations: usize,
    /// llama: evaluated prompts kept for reuse by later generations (LRU).
    #[arg(long, default_value_t = 16)]
    prefix_cache: usize,
    /// llama and the forward mock: do not run the forward pass of each sampled token
    /// ahead of the next step (pipelining off).
    #[arg(long, alias = "no-pipeline")]
    no_overlap: bool,
    /// llama and the forward mock: one JSON line per step on stderr, with its times on
    /// the model thread (bench/overlap.sh reads them).
    #[arg(long)]
    trace_steps: bool,
    /// The forward mock: milliseconds each forward pass sleeps (the model's time).
    #[arg(long, default_value_t = 0)]
    forward_ms: u64,
    /// llama: layers offloaded to the GPU (builds with the `cuda` feature; default all
    /// there, 0 otherwise).
    #[arg(long)]
    gpu_layers: Option<u32>,
    /// Bearer token for the vLLM server.
    #[arg(long, env = "GRID_VLLM_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Bearer token this endpoint requires of its clients.
    #[arg(long, env = "GRID_ENDPOINT_API_KEY", hide_env_values = true)]
    require_api_key: Option<String>,
    /// Timeout of one vLLM request, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    vllm_timeout_ms: u64,
    /// Mask payloads kept.
    #[arg(long, default_value_t = 4096)]
    mask_cache: usize,
    /// Generations kept.
    #[arg(long, default_value_t = 4096)]
    max_sessions: usize,
    /// Most generations per step request (default 1024; --max-generations with --backend
    /// llama).
    #[arg(long)]
    max_batch: Option<usize>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("grid-endpoint: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("grid-endpoint: {msg}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Vocabulary { url, api_key } => {
            let config = ClientConfig {
                http: HttpConfig {
                    api_key: api_key.and_then(ApiKey::new),
                    ..HttpConfig::default()
                },
                ..ClientConfig::default()
            };
            let client = EndpointClient::new(&url, "", config).map_err(|e| e.to_string())?;
            let served = client.fetch_vocabulary().await.map_err(|e| e.to_string())?;
            let v = &served.vocabulary;
            println!("endpoint     {}", client.endpoint());
            println!("protocol     {}", served.header.protocol);
            println!("model        {}", served.header.model);
            println!("fingerprint  {}", v.fingerprint());
            println!("tokens       {}", v.len());
            println!("special      {}", v.special_ids().len());
            println!("eos          {:?}", v.eos_id());
            println!("mask cache   {}", served.header.mask_cache_capacity);
            println!("max batch    {}", served.header.max_batch);
            Ok(())
        }
        Command::Fingerprint { tokenizer, eos } => {
            let v = load_vocab(Some(&tokenizer), eos)?;
            println!(
                "{}  tokens={} eos={:?}",
                v.fingerprint(),
                v.len(),
                v.eos_id()
            );
            Ok(())
        }
    }
}

fn load_vocab(path: Option<&PathBuf>, eos: Option<u32>) -> Result<Vocabulary, String> {
    let path = path.ok_or("--tokenizer is required with this backend")?;
    let v = if path.as_os_str() == "builtin" {
        grid_endpoint::backend::builtin::builtin_vocabulary()
    } else {
        Vocabulary::load(path)
    };
    let v = v.map_err(|e| format!("tokenizer {}: {e}", path.display()))?;
    match eos {
        Some(id) => v.with_eos(id).map_err(|e| format!("--eos {id}: {e}")),
        None => Ok(v),
    }
}

#[cfg(feature = "llama")]
fn load_llama(args: &ServeArgs) -> Result<(Arc<dyn Backend>, Arc<Vocabulary>), String> {
    use grid_endpoint::backend::llama::{LlamaBackend, LlamaConfig};
    if args.tokenizer.is_some() {
        return Err("--backend llama reads the tokenizer from the GGUF; drop --tokenizer".into());
    }
    let model = args
        .model
        .as_ref()
        .ok_or("--backend llama needs --model FILE.gguf (see scripts/model.sh)")?;
    let mut config = LlamaConfig::new(model);
    config.threads = args.threads;
    config.ctx = args.ctx;
    config.max_generations = args.max_generations;
    config.prefix_cache = args.prefix_cache;
    config.overlap = !args.no_overlap;
    config.trace = args.trace_steps;
    config.eos = args.eos;
    if let Some(n) = args.gpu_layers {
        config.gpu_layers = n;
    }
    let backend = LlamaBackend::load(&config)?;
    let vocab = backend.vocabulary().clone();
    Ok((Arc::new(backend), vocab))
}

#[cfg(not(feature = "llama"))]
fn load_llama(_: &ServeArgs) -> Result<(Arc<dyn Backend>, Arc<Vocabulary>), String> {
    Err("this grid-endpoint was built without the llama backend: \
         cargo build --release -p grid-endpoint --features llama"
        .into())
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let (backend, vocab, max_batch): (Arc<dyn Backend>, Arc<Vocabulary>, usize) = match args.backend
    {
        BackendKind::Llama => {
            let (backend, vocab) = load_llama(&args)?;
            (
                backend,
                vocab,
                args.max_batch.unwrap_or(args.max_generations),
            )
        }
        BackendKind::Mock | BackendKind::Vllm => {
            let vocab = Arc::new(load_vocab(args.tokenizer.as_ref(), args.eos)?);
            let backend = mock_or_vllm(&args, &vocab)?;
            // The forward mock holds at most --max-generations generations' logits.
            let forward =
                args.backend == BackendKind::Mock && matches!(args.mock, MockKind::Forward);
            let default_batch = if forward { args.max_generations } else { 1024 };
            (backend, vocab, args.max_batch.unwrap_or(default_batch))
        }
    };
    run_server(&args, vocab, backend, max_batch).await
}

fn mock_or_vllm(args: &ServeArgs, vocab: &Arc<Vocabulary>) -> Result<Arc<dyn Backend>, String> {
    Ok(match args.backend {
        BackendKind::Mock => match args.mock {
            MockKind::Scripted => {
                let script = match &args.script {
                    Some(p) => {
                        let text = std::fs::read_to_string(p)
                            .map_err(|e| format!("script {}: {e}", p.display()))?;
                        Script::parse(&text).map_err(|e| format!("script {}: {e}", p.display()))?
                    }
                    None => Script::default(),
                };
                Arc::new(ScriptedMock::new(vocab.clone(), script))
            }
            MockKind::Adversarial => Arc::new(AdversarialMock::new(vocab.clone())),
            MockKind::Forward => {
                let forward = HashedForward {
                    vocab_size: vocab.len(),
                    delay: Duration::from_millis(args.forward_ms),
                    seed: 0,
                };
                let config = ForwardConfig {
                    overlap: !args.no_overlap,
                    max_generations: args.max_generations,
                    trace: args.trace_steps,
                };
                Arc::new(ForwardMock::new(vocab, forward, config)?)
            }
        },
        BackendKind::Vllm => {
            let url = args
                .vllm_url
                .clone()
                .ok_or("--backend vllm needs --vllm-url")?;
            let model = args.model.clone().ok_or("--backend vllm needs --model")?;
            let http = HttpConfig {
                request_timeout: Duration::from_millis(args.vllm_timeout_ms),
                api_key: args.api_key.clone().and_then(ApiKey::new),
                ..HttpConfig::default()
            };
            Arc::new(
                VllmBackend::new(VllmConfig { url, model, http }, vocab.clone())
                    .map_err(|e| e.to_string())?,
            )
        }
        BackendKind::Llama => return Err("internal: the llama backend is not a mock".into()),
    })
}

async fn run_server(
    args: &ServeArgs,
    vocab: Arc<Vocabulary>,
    backend: Arc<dyn Backend>,
    max_batch: usize,
) -> Result<(), String> {
    let config = ServerConfig {
        mask_cache_capacity: args.mask_cache,
        max_sessions: args.max_sessions,
        max_batch,
        api_key: args.require_api_key.clone().and_then(ApiKey::new),
        ..ServerConfig::default()
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!(
        "grid-endpoint: serving {} (model {}, vocabulary {} of {} tokens) on http://{addr}",
        grid_endpoint::PROTOCOL,
        backend.model(),
        vocab.fingerprint(),
        vocab.len()
    );
    let server = Server::new(vocab, backend, config);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server
        .serve(listener, shutdown)
        .await
        .map_err(|e| e.to_string())
}
