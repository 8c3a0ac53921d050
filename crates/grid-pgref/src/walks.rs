//! Random walks of a language: generations through the decode loop (the extension's own)
//! with a model that picks uniformly among the tokens the mask allows, so that what comes
//! out is the language itself; the token budget makes the reserve complete each walk into
//! a statement. Where the statement's own names allow some tokens, the model takes one of
//! them half the time, so that walks use the names they introduce.

use std::sync::Arc;

use grid_core::audit::{AuditLog, SealMeta, StopReason};
use grid_core::cache::MaskCache;
use grid_core::cd_class::CdKey;
use grid_core::decode::{
    Choice, DecodeOptions, Decoder, GenerationSpec, Model, ModelError, ModelStep, StepModel,
};
use grid_core::mask::Masker;
use grid_core::reserve::{ReserveTable, Speller};
use grid_core::trie::TokenTrie;
use grid_core::Language;
use grid_endpoint::backend::mock::mix;
use grid_vocab::Vocabulary;

/// The walking model: EOS with probability 1/`eos_one_in` when allowed; else a token
/// only names allow (half the time, when there is one), else any allowed token.
struct Walker {
    eos_one_in: u64,
    /// The vocabulary's EOS id (set in a mask only with the gate open).
    eos: Option<u32>,
}

impl StepModel for Walker {
    fn choose(&mut self, s: &ModelStep<'_>) -> Result<Choice, ModelError> {
        let h = mix(s.seed, s.generated.len() as u64);
        if s.mask.eos && h % self.eos_one_in == 0 {
            return Ok(Choice::Eos);
        }
        let named: Vec<u32> = s
            .mask
            .cd_classes
            .iter()
            .filter(|c| *c.key == CdKey::Dynamic)
            .flat_map(|c| c.ids.iter().copied())
            .collect();
        let pick = |ids: &[u32], h: u64| ids[(h >> 16) as usize % ids.len()];
        if !named.is_empty() && (h >> 8) & 1 == 0 {
            return Ok(Choice::Token(pick(&named, h)));
        }
        let all: Vec<u32> = s.mask.ids().filter(|&i| Some(i) != self.eos).collect();
        if all.is_empty() {
            return Ok(Choice::Eos);
        }
        Ok(Choice::Token(pick(&all, h)))
    }
}

/// Walks over one vocabulary, sharing its trie, speller and mask cache.
pub struct Walks<'v> {
    vocab: &'v Vocabulary,
    trie: Arc<TokenTrie>,
    speller: Speller,
    cache: Arc<MaskCache>,
}

impl<'v> Walks<'v> {
    pub fn new(vocab: &'v Vocabulary) -> Walks<'v> {
        Walks {
            vocab,
            trie: TokenTrie::shared(vocab).expect("token trie"),
            speller: Speller::of(vocab),
            cache: Arc::new(MaskCache::new(8)),
        }
    }

    /// `n` walks of `lang` of at most `max_tokens` tokens each, seeded by `seed`: the text
    /// of every walk that ended in a statement (EOS or the reserve's completion).
    pub fn run(&self, lang: &Language, n: u64, seed: u64, max_tokens: u32) -> Vec<String> {
        let mut walker = Walker {
            eos_one_in: 6,
            eos: self.vocab.eos_id(),
        };
        let prompts = vec![Vec::new(); n as usize];
        self.generate(lang, &mut walker, &prompts, seed, max_tokens)
    }

    /// One generation of `lang` per prompt with `model` (a mock of the reference endpoint,
    /// or the walker): the text of each that ended in a statement.
    pub fn generate(
        &self,
        lang: &Language,
        model: &mut dyn Model,
        prompts: &[Vec<u32>],
        seed: u64,
        max_tokens: u32,
    ) -> Vec<String> {
        let reserve = ReserveTable::build(lang, &self.speller);
        let specs: Vec<GenerationSpec<'_>> = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| GenerationSpec {
                id: i as u64,
                language: lang,
                reserve: &reserve,
                prompt: p.clone(),
                max_tokens,
                seed: mix(seed, i as u64),
                meta: SealMeta::default(),
                unconstrained: false,
                rewind: None,
            })
            .collect();
        let mut decoder = Decoder::new(
            self.vocab,
            Masker::with_cache(self.trie.clone(), self.cache.clone()),
            &self.speller,
            DecodeOptions::default(),
        );
        let mut log = AuditLog::in_memory();
        let out = decoder
            .run(&specs, model, &mut log, &mut |_, _| false)
            .expect("an in-memory audit log");
        out.into_iter()
            .filter(|o| matches!(o.stop, StopReason::Eos | StopReason::BudgetCompleted))
            .map(|o| String::from_utf8_lossy(&o.text).into_owned())
            .collect()
    }
}
