/* GGUF metadata and tensor table listing for `headscope info` (private to the CLI). */
#ifndef HEADSCOPE_CLI_GGUF_INFO_H
#define HEADSCOPE_CLI_GGUF_INFO_H

#include <stdio.h>

/* Prints the header facts, every key/value pair (arrays shortened to their first
 * elements) and the tensor table of the GGUF file at path to out, in the spirit of
 * gguf-dump. On a malformed file prints "headscope: info: ..." to stderr and returns 1;
 * returns 0 on success (the caller checks out for write errors). */
int gguf_print_info(const char *path, FILE *out);

/* The ggml type names of the token embeddings and of the LM head (output.weight) of the
 * GGUF file at path into emb and head (cap bytes each); head "" when the file has none
 * (tied). 0 on success, -1 when the file cannot be read or has no token embeddings. */
int gguf_table_types(const char *path, char *emb, char *head, size_t cap);

#endif
