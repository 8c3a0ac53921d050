//! A fake OpenAI-compatible completions server (vLLM dialect) on loopback (grid-ask's
//! direct-mode tests include this file too). Its "model"
//! is a fixed scoring function of the token-id prefix ([`logits`]), so greedy decoding
//! — plain, under `allowed_token_ids`, or under `logit_bias` — is well defined and can
//! be recomputed by the tests. It records every request and answers at most
//! `max_requests` of them (503 after). Its chat template ([`chat_text`]) and tokenizer
//! (one id per byte, modulo the vocabulary's size, plus `tokenize_offset`) serve `/apply-template` and `/tokenize` in
//! llama-server's and vLLM's forms.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use grid_endpoint::backend::mock::mix;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// How the fake behaves.
#[derive(Debug, Clone)]
pub struct FakeOptions {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// The EOS id.
    pub eos: u32,
    /// Answer 400 to any request with `allowed_token_ids` (a stock server).
    pub reject_allowed_token_ids: bool,
    /// Ignore `allowed_token_ids` and `logit_bias` (a broken server).
    pub ignore_constraints: bool,
    /// Token strings used when `return_tokens_as_token_ids` is not requested.
    pub names: Option<Arc<Vec<String>>>,
    /// Put the EOS token in the output when the model stops on it.
    pub include_eos: bool,
    /// Requests answered before answering 503.
    pub max_requests: usize,
    /// The one model served: listed by `GET /v1/models`, and a completion for another
    /// is answered 404 as vLLM does (`None`: any name, and no `/v1/models`).
    pub model: Option<String>,
    /// Added to every id `/tokenize` writes (a tokenizer that is not the client's).
    pub tokenize_offset: u32,
    /// Close a kept-alive connection that waits this long for its next request, as
    /// llama.cpp's server and uvicorn do after 5 s (`None`: keep it open).
    pub idle_close: Option<std::time::Duration>,
}

/// The fake's chat template: ChatML, the assistant's turn opened.
pub fn chat_text(messages: &[(&str, &str)]) -> String {
    let mut t: String = messages
        .iter()
        .map(|(role, content)| format!("<|im_start|>{role}\n{content}<|im_end|>\n"))
        .collect();
    t.push_str("<|im_start|>assistant\n");
    t
}

fn chat_of(v: &Value) -> Option<String> {
    let pairs: Option<Vec<(&str, &str)>> = v
        .as_array()?
        .iter()
        .map(|m| Some((m["role"].as_str()?, m["content"].as_str()?)))
        .collect();
    Some(chat_text(&pairs?))
}

impl FakeOptions {
    /// A well-behaved vLLM-like server over `vocab_size` ids.
    pub fn vllm(vocab_size: usize, eos: u32) -> Self {
        FakeOptions {
            vocab_size,
            eos,
            reject_allowed_token_ids: false,
            ignore_constraints: false,
            names: None,
            include_eos: false,
            max_requests: 10_000,
            model: None,
            tokenize_offset: 0,
            idle_close: None,
        }
    }
}

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Logged {
    /// The prompt (token ids).
    pub prompt: Vec<u32>,
    /// `max_tokens`.
    pub max_tokens: usize,
    /// `allowed_token_ids`, when sent.
    pub allowed: Option<Vec<u32>>,
    /// `logit_bias`, when sent.
    pub bias: Option<BTreeMap<u32, f64>>,
    /// `logprobs`.
    pub logprobs: usize,
    /// `return_tokens_as_token_ids`.
    pub token_ids: bool,
}

/// A running fake.
pub struct FakeOpenAi {
    /// Its address.
    pub addr: SocketAddr,
    /// The requests received, in order.
    pub log: Arc<Mutex<Vec<Logged>>>,
    stop: Option<oneshot::Sender<()>>,
}

impl FakeOpenAi {
    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Logged> {
        self.log.lock().expect("log").clone()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// The model: a logit per id after `prefix` (all of the prompt and output). Values are
/// distinct with overwhelming probability, so greedy has no ties. EOS grows more likely
/// with length, so generations end, up to a bound (10.5, about the best other token's, as
/// a real model's logits are bounded: after a long prompt `logit_bias` +100 still decides,
/// and EOS does not win every position).
pub fn logits(prefix: &[u32], vocab_size: usize, eos: u32) -> Vec<f64> {
    let n = prefix.len();
    let a = prefix.last().map_or(7, |&t| u64::from(t));
    let b = if n >= 2 { u64::from(prefix[n - 2]) } else { 11 };
    let h = mix(mix(a, b), (n % 5) as u64);
    (0..vocab_size as u32)
        .map(|id| {
            let u = (mix(h, u64::from(id)) >> 11) as f64 / (1u64 << 53) as f64;
            if id == eos {
                3.0 * u + 0.3 * n.min(25) as f64
            } else {
                10.0 * u
            }
        })
        .collect()
}

/// Greedy over `candidates` (all ids when `None`) of `logits + bias`.
pub fn greedy(
    prefix: &[u32],
    vocab_size: usize,
    eos: u32,
    candidates: Option<&[u32]>,
    bias: Option<&BTreeMap<u32, f64>>,
) -> u32 {
    let l = biased(prefix, vocab_size, eos, bias);
    let all: Vec<u32> = (0..vocab_size as u32).collect();
    let cands = candidates.unwrap_or(&all);
    let mut best = (cands[0], f64::NEG_INFINITY);
    for &id in cands {
        if l[id as usize] > best.1 {
            best = (id, l[id as usize]);
        }
    }
    best.0
}

fn biased(prefix: &[u32], n: usize, eos: u32, bias: Option<&BTreeMap<u32, f64>>) -> Vec<f64> {
    let mut l = logits(prefix, n, eos);
    if let Some(b) = bias {
        for (&id, &v) in b {
            if (id as usize) < n {
                l[id as usize] += v;
            }
        }
    }
    l
}

/// Starts the fake on loopback.
pub async fn spawn(options: FakeOptions) -> FakeOpenAi {
    let listener = TcpListener::bind(super::loopback())
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let log = Arc::new(Mutex::new(Vec::new()));
    let served = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = oneshot::channel::<()>();
    let (opts, l) = (Arc::new(options), log.clone());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut rx => return,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { return };
                    let (opts, l, served) = (opts.clone(), l.clone(), served.clone());
                    let idle_close = opts.idle_close;
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let (opts, l, served) = (opts.clone(), l.clone(), served.clone());
                            async move { Ok::<_, Infallible>(handle(req, &opts, &l, &served).await) }
                        });
                        let mut http = hyper::server::conn::http1::Builder::new();
                        if let Some(idle) = idle_close {
                            // The wait for a request's head includes the idle wait
                            // between two requests on one connection.
                            http.timer(hyper_util::rt::TokioTimer::new())
                                .header_read_timeout(idle);
                        }
                        let _ = http.serve_connection(TokioIo::new(stream), service).await;
                    });
                }
            }
        }
    });
    FakeOpenAi {
        addr,
        log,
        stop: Some(tx),
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    o: &FakeOptions,
    log: &Mutex<Vec<Logged>>,
    served: &AtomicUsize,
) -> Response<Full<Bytes>> {
    if served.fetch_add(1, Ordering::SeqCst) >= o.max_requests {
        return reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": {"message": "request budget exhausted"}}),
        );
    }
    if let (Some(m), "/v1/models") = (&o.model, req.uri().path()) {
        return reply(
            StatusCode::OK,
            json!({"object": "list", "data": [{"id": m, "object": "model"}]}),
        );
    }
    let path = req.uri().path().to_string();
    if path == "/apply-template" || path == "/tokenize" {
        let Ok(body) = req.into_body().collect().await else {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": {"message": "body"}}),
            );
        };
        let v: Value = serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null);
        let text = match (
            path.as_str(),
            chat_of(&v["messages"]),
            v["content"].as_str(),
        ) {
            ("/apply-template", Some(t), _) => {
                return reply(StatusCode::OK, json!({ "prompt": t }))
            }
            ("/tokenize", Some(t), _) if v["add_generation_prompt"] == json!(true) => t,
            ("/tokenize", None, Some(c)) if v["parse_special"] == json!(true) => c.to_string(),
            _ => {
                return reply(
                    StatusCode::BAD_REQUEST,
                    json!({"error": {"message": "form"}}),
                )
            }
        };
        let tokens: Vec<u32> = text
            .bytes()
            .map(|b| u32::from(b) % o.vocab_size as u32 + o.tokenize_offset)
            .collect();
        return reply(StatusCode::OK, json!({ "tokens": tokens }));
    }
    if path != "/v1/completions" {
        return reply(StatusCode::NOT_FOUND, json!({"error": {"message": "no"}}));
    }
    let Ok(body) = req.into_body().collect().await else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "body"}}),
        );
    };
    let Ok(v) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "json"}}),
        );
    };
    let ids = |v: &Value| -> Option<Vec<u32>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_u64().map(|n| n as u32))
            .collect()
    };
    let prompt = ids(&v["prompt"]).unwrap_or_default();
    let max_tokens = v["max_tokens"].as_u64().unwrap_or(16) as usize;
    let allowed = ids(&v["allowed_token_ids"]);
    let bias: Option<BTreeMap<u32, f64>> = v["logit_bias"].as_object().map(|m| {
        m.iter()
            .filter_map(|(k, x)| Some((k.parse().ok()?, x.as_f64()?)))
            .collect()
    });
    let logprobs = v["logprobs"].as_u64().unwrap_or(0) as usize;
    let token_ids = v["return_tokens_as_token_ids"].as_bool().unwrap_or(false);
    log.lock().expect("log").push(Logged {
        prompt: prompt.clone(),
        max_tokens,
        allowed: allowed.clone(),
        bias: bias.clone(),
        logprobs,
        token_ids,
    });
    if let Some(m) = &o.model {
        if v["model"].as_str() != Some(m.as_str()) {
            return reply(
                StatusCode::NOT_FOUND,
                json!({"error": {"message": format!("The model `{}` does not exist.", v["model"])}}),
            );
        }
    }
    if allowed.is_some() && o.reject_allowed_token_ids {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Unrecognized request argument: allowed_token_ids"}}),
        );
    }
    if let Some(a) = &allowed {
        if a.is_empty() || a.iter().any(|&id| id as usize >= o.vocab_size) {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": {"message": "bad allowed_token_ids"}}),
            );
        }
    }
    let (allowed, bias) = if o.ignore_constraints {
        (None, None)
    } else {
        (allowed, bias)
    };
    let name = |id: u32| -> String {
        match (&o.names, token_ids) {
            (Some(names), false) => names[id as usize].clone(),
            _ => format!("token_id:{id}"),
        }
    };
    let mut context = prompt.clone();
    let (mut tokens, mut token_lps, mut tops) = (Vec::new(), Vec::new(), Vec::new());
    let mut finish = "length";
    for _ in 0..max_tokens {
        let l = biased(&context, o.vocab_size, o.eos, bias.as_ref());
        let t = greedy(
            &context,
            o.vocab_size,
            o.eos,
            allowed.as_deref(),
            bias.as_ref(),
        );
        let m = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + l.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
        let mut order: Vec<u32> = (0..o.vocab_size as u32).collect();
        order.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]));
        if t == o.eos && !o.include_eos {
            finish = "stop";
            break;
        }
        tokens.push(json!(name(t)));
        token_lps.push(json!(l[t as usize] - lse));
        let top: serde_json::Map<String, Value> = order
            .iter()
            .take(logprobs)
            .map(|&id| (name(id), json!(l[id as usize] - lse)))
            .collect();
        tops.push(Value::Object(top));
        if t == o.eos {
            finish = "stop";
            break;
        }
        context.push(t);
    }
    reply(
        StatusCode::OK,
        json!({
            "id": "cmpl-fake",
            "object": "text_completion",
            "model": "fake",
            "choices": [{
                "index": 0,
                "text": "",
                "finish_reason": finish,
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": token_lps,
                    "top_logprobs": tops,
                    "text_offset": []
                }
            }]
        }),
    )
}
