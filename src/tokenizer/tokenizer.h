// SPDX-License-Identifier: MIT
// tokenizer: byte-level BPE for Muse Glimmer (Llama-4 l4_200k_base ranks + 2,048 specials).
// Loads from a GGUF (tokenizer.ggml.tokens/merges/token_type, GPT-2 byte-to-unicode strings) or
// from a tiktoken .model file (base64 token + rank per line). Pre-tokenization uses the
// o200k/Llama-4 regex (with \p{M}) on PCRE2 (UTF, UCP, JIT). Special tokens are matched in the
// input only when the caller asks. Immutable after load: safe to share across threads.
#pragma once

#include "base/base.h"
#include "gguf/gguf.h"

#include <stddef.h>
#include <stdint.h>

typedef int32_t gl_token;

#define GL_TOK_N_BASE      200000 // mergeable ranks in l4_200k_base
#define GL_TOK_N_SPECIAL   2048   // specials at ids 200000..202047
#define GL_TOK_BOS         200000 // <|begin_of_text|>
#define GL_TOK_EOS         200001 // <|end_of_text|>
#define GL_TOK_EOM         200007 // <|eom|> (NOT a stop token)
#define GL_TOK_EOT         200008 // <|eot|>
#define GL_TOK_PAD         200018 // <|finetune_right_pad|>
#define GL_TOK_IMAGE_START 200080 // <|image_start|> (arch doc §6.4)
#define GL_TOK_IMAGE_END   200081 // <|image_end|>
#define GL_TOK_PATCH       200092 // <|patch|>: the image soft-token placeholder (image_token_id)

// GGUF token_type values.
enum gl_tok_type {
    GL_TOKTYPE_NORMAL = 1,
    GL_TOKTYPE_UNKNOWN = 2,
    GL_TOKTYPE_CONTROL = 3,
    GL_TOKTYPE_USER_DEFINED = 4,
    GL_TOKTYPE_UNUSED = 5,
    GL_TOKTYPE_BYTE = 6
};

struct gl_tokenizer;

// From GGUF metadata (the gguf may be closed afterwards: everything is copied). Needs
// tokenizer.ggml.model "gpt2" and pre "llama4" or "gpt-4o" (others: GL_E_UNSUPPORTED).
GL_MUST_USE gl_status gl_tokenizer_load_gguf(struct gl_tokenizer **out, const struct gl_gguf *g,
                                             struct gl_err *err);
// From a tiktoken ranks file; adds the 2,048 Muse Glimmer specials at 200000+ (arch doc §4) and
// derives the merge list (each multi-byte token split into the two parts BPE produces).
GL_MUST_USE gl_status gl_tokenizer_load_tiktoken(struct gl_tokenizer **out, const char *path,
                                                 struct gl_err *err);
// From an HF model folder: dir/tokenizer.model (the tiktoken ranks file, as above) with BOS
// prepended to plain encodes, as HF's post-processor does (arch doc §4). GL_E_IO names the file.
GL_MUST_USE gl_status gl_tokenizer_load_hf_dir(struct gl_tokenizer **out, const char *dir,
                                               struct gl_err *err);
void gl_tokenizer_free(struct gl_tokenizer *t); // NULL-safe

int32_t gl_tokenizer_n_vocab(const struct gl_tokenizer *t);
gl_token gl_tokenizer_bos(const struct gl_tokenizer *t);
gl_token gl_tokenizer_eos(const struct gl_tokenizer *t);
gl_token gl_tokenizer_eot(const struct gl_tokenizer *t); // -1 if none
int gl_tokenizer_add_bos(const struct gl_tokenizer *t);  // tokenizer.ggml.add_bos_token
// Raw bytes of a token (specials: their name, e.g. "<|eot|>"). *len set; NULL if id out of range.
const char *gl_tokenizer_token_bytes(const struct gl_tokenizer *t, gl_token id, size_t *len);
enum gl_tok_type gl_tokenizer_token_type(const struct gl_tokenizer *t, gl_token id);
int gl_tokenizer_is_special(const struct gl_tokenizer *t, gl_token id);
// Special token id by name ("<|eot|>"), -1 if none.
gl_token gl_tokenizer_find_special(const struct gl_tokenizer *t, const char *name);

// Merge list in priority order (for the GGUF writer): merge i joins tokens left and right.
int64_t gl_tokenizer_n_merges(const struct gl_tokenizer *t);
void gl_tokenizer_merge_at(const struct gl_tokenizer *t, int64_t i, gl_token *left,
                           gl_token *right);

// Encodes len bytes of text (any bytes; invalid UTF-8 is tokenized byte-wise as tiktoken does).
// parse_special: recognise special-token names in the text. add_bos: prepend BOS.
// Invalid UTF-8: every maximal run of bytes that do not start a valid sequence (stray
// continuation, truncated, overlong, surrogate, > U+10FFFF) is one BPE piece of raw bytes, and the
// valid text around it is split as if the run were a string boundary; decode(encode(x)) == x.
// Specials (token_type 3 and 4) match only with parse_special, longest name first.
// *ids is malloc'ed (caller gl_free), *n_ids its length.
GL_MUST_USE gl_status gl_tokenizer_encode(const struct gl_tokenizer *t, const char *text,
                                          size_t len, int parse_special, int add_bos,
                                          gl_token **ids, size_t *n_ids, struct gl_err *err);

// Streaming decoder: feeds token bytes and releases only complete UTF-8 sequences, holding back
// an incomplete tail until the next token completes it (or flush emits it as is).
struct gl_detok {
    uint8_t pending[8];
    int n_pending;
};
// Appends the decodable bytes of token id to out (cap bytes); returns the byte count written, or
// -1 if cap is too small (nothing consumed). cap >= token length + 8 always suffices.
// skip_special: drop control/special tokens from the text.
int gl_detok_feed(struct gl_detok *d, const struct gl_tokenizer *t, gl_token id, int skip_special,
                  char *out, size_t cap);
int gl_detok_flush(struct gl_detok *d, char *out, size_t cap);
