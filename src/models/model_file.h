/* Model description files (doc/reference.md section 11.1): a model as a
 * JSON document, read through the builder (model_file.c, --model
 * FILE.json) and written from any built model (model_print.c, cdp_run
 * --print-model).  The names below are the file's words for the layer
 * kinds and initialisations, shared by the reader and the writer. */
#ifndef CDP_MODELS_MODEL_FILE_H
#define CDP_MODELS_MODEL_FILE_H

#include <stdio.h>
#include "builder.h"

#define CDP_MODEL_FILE_FORMAT "cdp-model"
#define CDP_MODEL_FILE_VERSION 1

/* The file's "kind" of each layer kind (the cdp_builder_ call's name:
 * "pos_embed", where the layer's ops say "pos_embedding"), and of each
 * cdp_init_style ("torch", "xavier", ...). */
extern const char *const cdp_model_file_kinds[CDP_LAYER_KINDS];
extern const char *const cdp_model_file_inits[4];

/* 1 when a --model spec names a description file: it ends in ".json". */
int cdp_model_file_spec(const char *spec);

/* Adds to b the model the description text[0..len) describes, its
 * default stage count into *default_stages: 0, or -1 with one line in b's
 * error naming the block, the layer and the shapes. */
int cdp_model_file_read(cdp_builder *b, const char *text, size_t len, int *default_stages);

/* Writes m (built: its layers and blocks) as a description that
 * cdp_model_file_read builds back into the same model; 0, or -1 when f
 * could not be written. */
int cdp_model_print(FILE *f, const cdp_model *m);

#endif
