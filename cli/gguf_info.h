/* GGUF metadata and tensor table listing for `headscope info` (private to the CLI). */
#ifndef HEADSCOPE_CLI_GGUF_INFO_H
#define HEADSCOPE_CLI_GGUF_INFO_H

#include <stdio.h>

#include "headscope/gguf.h"

/* Prints the header facts, every key/value pair (arrays shortened to their first
 * elements) and the tensor table of the GGUF file g to out, in the spirit of gguf-dump
 * (the caller checks out for write errors). */
void gguf_print_info(const hs_gguf *g, FILE *out);

/* The ggml type names of the token embeddings and of the LM head (output.weight) of g into
 * emb and head (cap bytes each); head "" when the file has none (tied). 0 on success, -1
 * when g has no token embeddings. */
int gguf_table_types(const hs_gguf *g, char *emb, char *head, size_t cap);

#endif
