// SPDX-License-Identifier: MIT
// video: the video input path up to the encoder (muse-glimmer-arch.md §6.4-6.5): decode a clip
// held in memory with libavformat/libavcodec, pick frames at 2 fps (at most 96, an even count),
// convert them to 8-bit RGB with libswscale, resize every frame to one patch grid under a cap of
// 144 merged tokens, then normalise and cut into 14x14x2 patch vectors, two frames per temporal
// patch. Also the prompt layout that stands for one video.
//
// Reference behaviour is transformers' MuseGlimmerVideoProcessor + MuseGlimmerProcessor with
// their default video loader (torchcodec, seek_mode "exact"):
//  - total frames = the frames in the stream, counted from its packets (as torchcodec's exact
//    scan does), not the header's nb_frames or duration x fps, which a file can get wrong;
//    source fps = the stream's avg_frame_rate, else r_frame_rate, else 24 (HF's default when the
//    fps is unknown). torchcodec's exact mode derives its fps from the scanned timestamps
//    (frames / span); for constant-rate files that is the same number.
//  - sample count (HF sample_frames), in float64 as Python does it:
//      n = min(int(total * fps / src_fps), max_frames, total); n = max(2, n // 2 * 2);
//      n = min(n, total)
//    and indices = torch.linspace(0, total - 1, n).long(): float32 linspace (torch's CPU kernel
//    computes start + step * i for i < n / 2 and end - step * (n - 1 - i) above, the latter as
//    one fused multiply-add in torch's x86-64/aarch64 builds, step = (end - start) / (n - 1) in
//    float32), truncated toward zero. See gl_video_sample_indices.
//  - frames are numbered in presentation order as the decoder outputs them; the sampled list is
//    padded to an even count by repeating its last frame (HF patchify).
//  - RGB: libswscale, SWS_BILINEAR, colour matrix from the frame's colorspace tag
//    (sws_getCoefficients: untagged = BT.601), as torchcodec's CPU path does; range from the
//    frame's range tag when set, else the pixel format's (yuvj* full, other YUV limited). That
//    is torchcodec's filtergraph path (used for widths not a multiple of 32) and the ffmpeg
//    CLI's scale filter; torchcodec's swscale path ignores the range tag, which only matters for
//    a range-tagged non-j YUV format.
//  - grid: the §6.2 search with max_video_frame_tokens (144) as the cap, from the first frame's
//    size, for every frame; resize with Pillow's Lanczos (gl_image_resize), as the image path
//    does. HF resizes video frames with torchvision, so exact pixel parity of the resize step with
//    HF is not claimed (the same caveat as §6.2 step 3).
//  - timestamps: one per temporal group g, HF's metadata.timestamps[::2], i.e. index[2g] / fps;
//    HF holds the indices in an int64 tensor, so the division is float32 (float(index) /
//    float(fps)), and the prompt prints it with Python's "{:.1f}". vLLM prints g * 2 / fps
//    instead (the §6.4 [DISAGREE]); we follow HF.
//
// Hostile input: every size and count is checked against struct gl_video_limits before the
// matching allocation or decode; only mov/mp4, matroska/webm, avi, mpegts, flv, ogg and gif are
// demuxed, and no demuxer may open another file or URL. Decoding stops after the last sampled
// frame. Errors return a gl_status (GL_E_FORMAT, GL_E_LIMIT, GL_E_UNSUPPORTED, GL_E_INVAL,
// GL_E_NOMEM) with a message "video: <part>: <what>" in err; nothing stays allocated on failure.
// Thread-safe: no state is shared between calls, except that the first call lowers FFmpeg's
// process-wide log level to AV_LOG_FATAL (GLINT_LOG=debug keeps FFmpeg's own messages), so that
// a broken upload does not write FFmpeg warnings to the server's stderr.
#pragma once

#include "base/base.h"
#include "image/image.h"

#include <stddef.h>
#include <stdint.h>

#define GL_VIDEO_FPS              2.0       // frames sampled per second of video (HF fps)
#define GL_VIDEO_MAX_FRAMES       96        // default cap on sampled frames (HF num_frames)
#define GL_VIDEO_MAX_FRAMES_LIMIT 1024      // ceiling for that cap: 1024 x 144 tokens
#define GL_VIDEO_TEMPORAL         2         // frames per temporal patch (temporal_patch_size)
#define GL_VIDEO_MAX_FRAME_TOKENS 144       // default cap on merged tokens per frame
#define GL_VIDEO_MAX_CLIP_TOKENS  (1 << 17) // ceiling for max_frames x max_frame_tokens
#define GL_VIDEO_DEFAULT_FPS      24.0      // assumed source fps when the stream has none

// Special token ids (muse-glimmer-arch.md §4).
#define GL_VIDEO_TOK_START 200082 // <|vid_start|>
#define GL_VIDEO_TOK_END   200083 // <|vid_end|>
#define GL_VIDEO_TOK_SEP   200087 // <|vid_frame_separator|>
#define GL_VIDEO_TOK_VIDEO 200091 // <|video|>: one per merged token of a temporal group

// Limits on hostile input, checked before the matching allocation or decode.
struct gl_video_limits {
    size_t max_bytes;           // encoded size
    int max_side;               // decoded width and height, each
    uint64_t max_pixels;        // decoded width * height of one frame
    int64_t max_frames;         // frames in the stream (counted packets)
    double max_duration_s;      // frames / source fps
    uint64_t max_decode_pixels; // sum of width * height over the frames decoded
};
// 256 MiB, 4096 px per side, 4096 x 2304 px per frame, 108000 frames (an hour at 30 fps), one
// hour, 2^35 decoded pixels (about 16600 frames of 1080p: decoding runs from the start to the
// last sampled frame, with no seeking yet, so this bounds the time one request can take).
struct gl_video_limits gl_video_default_limits(void);

// Sampling and resize parameters (HF's fps, num_frames, max_video_frame_tokens), refused with
// GL_E_INVAL outside these ranges or when max_frames * max_frame_tokens > GL_VIDEO_MAX_CLIP_TOKENS.
struct gl_video_params {
    double fps;           // > 0 and <= 1000
    int max_frames;       // 1 .. GL_VIDEO_MAX_FRAMES_LIMIT
    int max_frame_tokens; // 1 .. GL_IMAGE_MAX_TOKENS_LIMIT
};
struct gl_video_params gl_video_default_params(void); // 2.0, 96, 144

// A preprocessed clip. Owns indices, timestamps and rgb; release with gl_video_free.
struct gl_video {
    int64_t total_frames;      // frames in the stream
    double src_fps;            // the fps used for sampling and timestamps (24 when unknown)
    int fps_known;             // 0 when src_fps is the default
    int src_width, src_height; // decoded frame size
    int n_sampled;             // frames sampled (before padding)
    int64_t *indices;          // [n_sampled] frame numbers, 0-based, presentation order
    int n_frames;              // T: n_sampled padded to a multiple of 2
    struct gl_image_grid grid; // merged tokens per frame: gh x gw
    int width, height;         // resized frame size: gw * 28 x gh * 28
    double *timestamps;        // [n_frames / 2] seconds, one per temporal group (float32 values)
    uint8_t *rgb;              // [n_frames][height][width][3] resized frames
};

// The sample count for a stream of total frames at src_fps (> 0), per the formula above; 0 when
// total < 1.
int gl_video_sample_count(int64_t total, double src_fps, double fps, int max_frames);

// idx[0..n) = torch.linspace(0, total - 1, n).long() as torch 2.x's CPU kernel computes it for
// float32 (the fused upper half), n >= 1, total >= 1.
void gl_video_sample_indices(int64_t total, int n, int64_t *idx);

// Decodes data[0..n) and runs the whole §6.5 pipeline up to resized RGB frames. lim and par may
// be NULL for the defaults. On success *out owns a new clip; on failure *out is zeroed.
gl_status gl_video_preprocess(const uint8_t *data, size_t n, const struct gl_video_limits *lim,
                              const struct gl_video_params *par, struct gl_video *out,
                              struct gl_err *err) GL_MUST_USE;

// Frees what v owns and zeroes *v. v may be NULL; freeing a zeroed clip is a no-op.
void gl_video_free(struct gl_video *v);

// Normalises to (x - 127.5) / 127.5 in float32 (HF's fused rescale + normalize for its torch
// video processor; gl_image_patchify's (x/255 - 0.5) / 0.5 can differ in the last bit) and cuts
// the clip into patch vectors:
// for each temporal group g (frames 2g and 2g+1), the (height/14) x (width/14) patches row-major,
// each 1176 floats laid out (temporal 2, channel 3, row 14, col 14), slab 0 from frame 2g. On
// success *out is a gl_malloc'd [*n_patches][1176] buffer the caller frees with gl_free;
// *n_patches = T/2 * (2 gh) * (2 gw). video_grid_thw is [T/2, 2 gh, 2 gw] in these 14-px units.
gl_status gl_video_patchify(const struct gl_video *v, float **out, size_t *n_patches,
                            struct gl_err *err) GL_MUST_USE;

// ---- prompt layout (§6.4) ----------------------------------------------------------------------
// One video expands to <|vid_start|>, then per temporal group
//   "Time: X.Xs" <|video|> x tokens_per_group
// with <|vid_frame_separator|> between groups and <|vid_end|> after the last. HF builds this
// as one string and its tokenizer splits special tokens out before BPE, so each "Time: X.Xs" is
// encoded on its own: the caller tokenizes each TEXT piece with a plain encode (no BOS, no
// specials) and expands each TOKEN piece to count copies of its id.
enum gl_video_piece_kind { GL_VIDEO_PIECE_TOKEN, GL_VIDEO_PIECE_TEXT };
struct gl_video_piece {
    enum gl_video_piece_kind kind;
    int32_t token; // TOKEN: the special id
    int count;     // TOKEN: how many in a row
    char text[32]; // TEXT: NUL-terminated, e.g. "Time: 12.5s"
};

// Writes "Time: X.Xs" (X.X = the timestamp with one decimal, as Python's "{:.1f}") to buf.
void gl_video_time_text(double seconds, char buf[32]);

// Fills out[0..cap) with the pieces for n_groups >= 1 groups of tokens_per_group >= 1 tokens each
// and returns how many pieces the layout has (1 + 3 * n_groups); when that exceeds cap only the
// first cap are written, so a call with cap 0 sizes the array. Returns -1 on bad arguments.
int gl_video_prompt_layout(const double *timestamps, int n_groups, int tokens_per_group,
                           struct gl_video_piece *out, int cap);
