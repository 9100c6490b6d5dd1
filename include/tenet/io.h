/* tenet/io.h — weights in and out: named tensors in the safetensors format;
 * data sets in: IDX files (MNIST's format), plain or gzipped.
 *
 *   tn_state_dict *sd = tn_state_dict_new();
 *   tn_state_dict_set(sd, "fc.weight", w);            // retains w
 *   tn_state_dict_set_metadata(sd, "format", "pt");
 *   tn_save("model.safetensors", sd);                 // writes a new file, then renames
 *   tn_state_dict_free(sd);
 *
 *   tn_state_dict *ck = tn_load("model.safetensors"); // NULL + message on any bad file
 *   tn_load_state_dict(ck, n, names, params, true);    // copy_ into the model, shapes checked
 *   tn_state_dict_free(ck);
 *
 * The format (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header size N, N bytes of JSON {"name": {"dtype": "F32",
 * "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__":
 * {"key": "value"}}, then the tensors' bytes, row-major, little-endian,
 * offsets relative to the end of the header. Files tenet writes are the
 * bytes Python's safetensors writes for the same tensors: tensors ordered by
 * dtype (8-byte types first) then name, the header in that order with
 * "__metadata__" first (its keys sorted: the reference writes them in a hash
 * map's order), compact JSON, padded with spaces to a multiple of 8.
 *
 * dtypes: F32, F64, I64, I32, I16 and BOOL load and save as tenet's (a bool
 * is saved as the byte 0 or 1, whatever byte its memory holds); F16 and
 * BF16 load converted to float32, exactly (every half and bfloat16 value,
 * subnormals, infinities and NaNs included, is a float32); tenet does not
 * write them. The format's other dtypes (U8, I8, U16, U32, U64, F8_*) are
 * TN_ERR_DTYPE: tenet has no type for them.
 *
 * Loading checks every number before using it and refuses a file that breaks
 * the format: header size beyond the file or above safetensors' limit of
 * 100,000,000 bytes, a header that is not UTF-8 JSON (cJSON parses it), an
 * entry with a missing or mistyped field, an unknown dtype, more than
 * TN_MAX_DIMS dims, a size or offset that is not an integer below 2^53, a
 * shape whose bytes overflow or differ from its data_offsets, offsets that
 * overlap, leave a gap, run backwards or past the end (the data region must be
 * covered exactly, as the format requires), a name given twice, a BOOL byte
 * other than 0 or 1. Each is NULL with TN_ERR_FORMAT (TN_ERR_DTYPE, TN_ERR_SHAPE
 * for a dtype or a rank tenet lacks) and a message in safetensors' words
 * ("Error while deserializing header: InvalidOffset: tensor 'b': ...");
 * I/O failures are TN_ERR_IO with the system's reason. Nothing leaks, and the
 * file is read with pread into the tensors' memory (no mmap: a file shrunk
 * under a mapping would fault).
 *
 * Ownership: a state dict holds one reference to each of its tensors and
 * copies of the names and metadata strings. Names and metadata returned are
 * borrowed (valid until the dict is freed or the entry replaced); tensors
 * returned are new references (registered in the open scope, as any
 * returned tensor). Loaded tensors are contiguous CPU tensors that do not
 * require grad.
 *
 * Threads: a dict may be read (count, name, get, save) from any number of
 * threads at once; tn_state_dict_set and _set_metadata need exclusive access.
 * Loads and saves of different dicts and files run in parallel (the JSON
 * parse itself is serialised: cJSON 1.7 writes a process-wide error
 * position on every parse).
 *
 * cJSON's allocation hooks: tenet installs them once, from a constructor
 * when the library is loaded, as the C library's malloc and free behind
 * tenet's allocation-failure hook (include/tenet/testing.h), so that every
 * allocation of a load is tenet's. A program that uses cJSON itself sees the
 * same allocator; one that installs hooks of its own later (cJSON_InitHooks)
 * replaces them, which tenet supports.
 *
 * IDX (tn_idx_load, below): the format of MNIST and Fashion-MNIST: two zero
 * bytes, a type byte (0x08 unsigned byte, 0x09 signed byte, 0x0B int16,
 * 0x0C int32, 0x0D float32, 0x0E float64), the number of dims, each dim as a
 * big-endian uint32, then the values, big-endian, row-major.
 *
 *   tn_tensor *x = tn_idx_load("train-images-idx3-ubyte.gz", TN_F32, 1.0 / 255); // [60000,28,28]
 *   tn_tensor *y = tn_idx_load("train-labels-idx1-ubyte.gz", TN_I64, 1.0);       // [60000]
 */
#ifndef TENET_IO_H
#define TENET_IO_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
TN_API_BEGIN

/* An ordered map of names to tensors, plus string metadata. Entries are kept
 * in byte-wise order of their names (strcmp), as safetensors' keys() lists
 * them; indices run 0 .. count-1 in that order. */
typedef struct tn_state_dict tn_state_dict;

/* ---- the container --------------------------------------------------------- */

/* An empty dict; NULL + TN_ERR_OUT_OF_MEMORY. Free with tn_state_dict_free. */
tn_state_dict *tn_state_dict_new(void);
/* Releases the dict's tensor references and frees it. NULL is a no-op.
 * Tensors obtained from it stay valid (they are the caller's references). */
void tn_state_dict_free(tn_state_dict *sd);
/* Adds or replaces the entry `name` (copied) with t (retained, not copied:
 * in-place writes to t show in a later tn_save; set a tn_clone to snapshot).
 * name must be valid UTF-8 and not "__metadata__" (TN_ERR_INVALID_ARGUMENT).
 * A replaced entry's tensor is released. */
tn_status tn_state_dict_set(tn_state_dict *sd, const char *name, tn_tensor *t);
/* Adds or replaces a metadata entry (both strings copied, valid UTF-8). */
tn_status tn_state_dict_set_metadata(tn_state_dict *sd, const char *key, const char *value);
/* Number of tensors; -1 + error for NULL. */
int64_t tn_state_dict_count(const tn_state_dict *sd);
/* Name of entry i (borrowed); NULL + TN_ERR_INDEX when out of range. */
const char *tn_state_dict_name(const tn_state_dict *sd, int64_t i);
/* Tensor of entry i (new reference); NULL + TN_ERR_INDEX when out of range. */
tn_tensor *tn_state_dict_at(const tn_state_dict *sd, int64_t i);
/* Tensor named `name` (new reference); NULL + TN_ERR_INDEX ("key 'x' not in
 * the state dict") when absent. tn_state_dict_contains asks without an error. */
tn_tensor *tn_state_dict_get(const tn_state_dict *sd, const char *name);
bool tn_state_dict_contains(const tn_state_dict *sd, const char *name);
/* Metadata ("__metadata__"): count, key i (borrowed, byte-wise order), and
 * the value of a key (borrowed; NULL with no error when absent). */
int64_t tn_state_dict_metadata_count(const tn_state_dict *sd);
const char *tn_state_dict_metadata_key(const tn_state_dict *sd, int64_t i);
const char *tn_state_dict_metadata(const tn_state_dict *sd, const char *key);

/* ---- safetensors ----------------------------------------------------------- */

/* Reads a safetensors file. Returns a new dict (free with
 * tn_state_dict_free), or NULL: TN_ERR_IO (cannot open or read), TN_ERR_FORMAT
 * (not a valid file: see the top of this header), TN_ERR_DTYPE (a dtype
 * tenet lacks), TN_ERR_SHAPE (more than TN_MAX_DIMS dims),
 * TN_ERR_OUT_OF_MEMORY. */
tn_state_dict *tn_load(const char *path);
/* The same from a file's bytes in memory (copied: data may be freed after). */
tn_state_dict *tn_load_buffer(const void *data, size_t size);

/* Writes sd's tensors (any layout, device or dtype of tenet's: written
 * contiguous, copied to the host) and metadata. The file is written under a
 * temporary name in the same folder and renamed over `path` once complete,
 * so a failed save leaves no partial file and an existing `path` unchanged
 * (the new file has the default permissions, 0666 less the umask; a symbolic
 * link at `path` is replaced, not followed; nothing is fsync'd).
 * Errors: TN_ERR_IO (with the system's reason), TN_ERR_OUT_OF_MEMORY, any
 * error of reading a device tensor, TN_ERR_INVALID_ARGUMENT for a size or
 * offset of 2^53 or more (an expanded view standing for petabytes, an empty
 * tensor with a size of 2^60), which JSON readers that parse numbers as
 * doubles, tenet's included, would not read back exactly. */
tn_status tn_save(const char *path, const tn_state_dict *sd);
/* The same for n tensors and their names (no metadata): names must be
 * distinct, valid UTF-8 and not "__metadata__". */
tn_status tn_save_tensors(const char *path, int n, const char *const *names,
                          tn_tensor *const *tensors);
/* The file's bytes in a new buffer (*size set); free it with tn_buffer_free.
 * NULL + error as tn_save. */
void *tn_save_buffer(const tn_state_dict *sd, size_t *size);
void tn_buffer_free(void *buffer);

/* ---- into a model (torch.nn.Module.load_state_dict) ------------------------ */

/* Copies sd's tensors into the model's n parameters params[i], named
 * names[i] (tn_copy_ with grad mode off, so leaves that require grad can be
 * written; each written parameter's version moves, as in PyTorch). Checked
 * before anything is written, and reported together in PyTorch's words:
 *   Error(s) in loading state_dict:
 *   	Missing key(s) in state_dict: "fc.bias".
 *   	Unexpected key(s) in state_dict: "fc.b".
 *   	size mismatch for fc.weight: copying a param with shape torch.Size([3, 4])
 *   from checkpoint, the shape in current model is torch.Size([4, 4]).
 * Missing and unexpected keys are errors only when strict (status
 * TN_ERR_INVALID_ARGUMENT); size mismatches always (TN_ERR_SHAPE). dtypes
 * convert as copy_ converts (a float16 checkpoint into float32 parameters),
 * except between a floating point and an integer or bool dtype, which is
 * refused ("dtype mismatch for X: ...", TN_ERR_DTYPE): PyTorch would convert,
 * and it is almost always a wrong file. A parameter named twice is
 * TN_ERR_INVALID_ARGUMENT. A copy that copy_ itself refuses after these
 * checks (out of memory; a parameter it cannot write, such as an expanded
 * view) leaves the parameters before it written. */
tn_status tn_load_state_dict(const tn_state_dict *sd, int n, const char *const *names,
                             tn_tensor *const *params, bool strict);

/* ---- IDX ------------------------------------------------------------------- */

/* Reads an IDX file, plain or gzip-compressed (told by its first bytes,
 * 1f 8b; zlib inflates it), into a new contiguous CPU tensor of the file's
 * dims (new reference, registered in the open scope; no grad).
 *
 * dtype: TN_DTYPE_SAME gives a tenet dtype that holds the file's values
 * exactly (bytes and int16: TN_I16, as tenet has no 8-bit type; int32:
 * TN_I32; float32 / float64: TN_F32 / TN_F64). A floating point dtype takes
 * any file: each value v becomes v * scale computed in double, rounded once
 * to float32 or float64 (bf16 / f16: rounded to float32, then to the half).
 * An integer dtype takes the integer types whose every value it holds
 * (TN_I64 and TN_I32 all of them, TN_I16 bytes and int16), with scale 1;
 * else TN_ERR_DTYPE (and TN_ERR_INVALID_ARGUMENT for another scale). So
 * PyTorch's ToTensor() is (dtype TN_F32, scale 1.0 / 255), i.e.
 * torch.from_numpy(u8).double().mul(1 / 255).float(), and class labels for
 * tn_cross_entropy are (TN_I64, 1.0).
 *
 * A file that breaks the format is NULL + TN_ERR_FORMAT with the reason
 * ("not a valid IDX file 'f': bad magic number ...", "unknown data type",
 * "0 dimensions", "the dimensions' product overflows", "the file ends
 * within the data (truncated?)", "trailing bytes", "truncated or damaged
 * gzip data (invalid block type)"); more than TN_MAX_DIMS dims is
 * TN_ERR_SHAPE. The dims are checked against the input's size before memory
 * is taken (a plain file's size must match them exactly; a gzipped one
 * cannot inflate more than 1032 times), the bytes are never read past the
 * input's end, and the gzip trailer (CRC, length) is checked. TN_ERR_IO:
 * cannot open or read, not a regular file; TN_ERR_OUT_OF_MEMORY. Nothing
 * leaks on any error. */
tn_tensor *tn_idx_load(const char *path, tn_dtype dtype, double scale);
/* The same from a file's bytes in memory (plain or gzipped; not kept). */
tn_tensor *tn_idx_load_buffer(const void *data, size_t size, tn_dtype dtype, double scale);

TN_API_END
#ifdef __cplusplus
}
#endif
#endif
