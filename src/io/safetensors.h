/* safetensors files: the weight files of cdp/weights.h (declared there,
 * written here) and the generic access checkpoints use.
 *
 * safetensors: 8-byte little-endian header length n, then n bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {...}}, then the raw little-endian data.  Tensor names for
 * every model are PyTorch's state_dict names and shapes (cdp_model's tensor
 * list): fc{j}.weight [out, in] and fc{j}.bias for the j-th Linear layer of
 * an mlp, torchvision's names for the ResNets. */
#ifndef CDP_IO_SAFETENSORS_H
#define CDP_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "cdp/weights.h"
#include "models/model.h"

/* Generic safetensors access for checkpoints: named F32 or I64 tensors. */
typedef struct cdp_st_tensor {
    const char *name;
    const char *dtype;     /* "F32" or "I64" */
    int ndim;
    int64_t shape[4];
    const void *data;      /* for writing */
    void *dst;             /* for reading: filled when the shape matches */
} cdp_st_tensor;

int cdp_st_write(const char *path, const cdp_st_tensor *t, int n,
                 const char *const *metadata, char *err, size_t errlen);
/* From a signal handler (async-signal-safe): removes the temporary file a
 * cdp_st_write of this process is writing, if any, so that a process ended
 * in the middle of a write leaves no PATH.tmp.HOST.PID behind. */
void cdp_st_discard_pending(void);
/* Every tensor in t must be present with that dtype and shape; others in the
 * file are an error when strict != 0.  metadata values can be fetched with
 * cdp_st_read_meta. */
int cdp_st_read(const char *path, cdp_st_tensor *t, int n, int strict,
                char *err, size_t errlen);
/* Copies the string value of metadata key into out; -1 when absent. */
int cdp_st_read_meta(const char *path, const char *key, char *out, size_t outlen,
                     char *err, size_t errlen);

/* CRC-32C (Castagnoli; iSCSI, RFC 3720 appendix B.4): reflected polynomial
 * 0x82F63B78, initial value and final xor 0xFFFFFFFF, so that
 * cdp_crc32c(0, "123456789", 9) == 0xE3069283.  crc is the value of the
 * bytes before (0 for none): cdp_crc32c(cdp_crc32c(0, a, n), b, m) is the
 * CRC of a followed by b.  Table-driven (slicing by 8), the same on every
 * host.  Detects every error of 1 to 3 bits and every burst of up to 32. */
uint32_t cdp_crc32c(uint32_t crc, const void *data, size_t n);
/* The CRC-32C of the data section cdp_st_write(t, n) writes: the tensors'
 * little-endian bytes, in the order of t, back to back. */
uint32_t cdp_st_tensors_crc32c(const cdp_st_tensor *t, int n);
/* The CRC-32C of a file's whole data section (every byte after the header),
 * once the file passed the checks of cdp_st_read.  0 or -1 with err. */
int cdp_st_data_crc32c(const char *path, uint32_t *crc, char *err, size_t errlen);

#endif
