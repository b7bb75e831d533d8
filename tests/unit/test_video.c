// SPDX-License-Identifier: MIT
// Unit tests for src/video: the §6.5 sample count (HF's own test cases) and indices, the §6.4
// prompt layout, decoding of the small committed clips of tests/fuzz/corpus/video (geometry,
// padding, patch layout), and refusals: empty input, garbage, HLS/concat playlists (which would
// open other files), every truncation of a valid clip, each limit and bad parameters must
// return an error with a "video: " message and leave nothing allocated (the ASan build checks
// leaks). Pixel parity with the ffmpeg CLI and the sampling formula against torch are the
// oracle's job (tests/oracle/check_video.sh).
#include "test.h"
#include "video/video.h"

#include <stdio.h>
#include <string.h>

#define CORPUS "tests/fuzz/corpus/video/"

static int is_zeroed(const struct gl_video *v)
{
    return !v->rgb && !v->indices && !v->timestamps && v->n_frames == 0 && v->width == 0;
}

// A refusal: the given status, a "video: " message, nothing left in *v.
static void check_refused(const uint8_t *p, size_t n, const struct gl_video_limits *lim,
                          const struct gl_video_params *par, gl_status want)
{
    struct gl_video v;
    struct gl_err err = {0};
    gl_status st = gl_video_preprocess(p, n, lim, par, &v, &err);
    CHECKF(st == want, "status %s, want %s (%s)", gl_status_name(st), gl_status_name(want),
           err.msg);
    CHECKF(!strncmp(err.msg, "video: ", 7), "message '%s'", err.msg);
    CHECK(is_zeroed(&v));
    if (st == GL_OK)
        gl_video_free(&v);
}

TEST(test_sample_count_hf_cases)
{
    // test_video_processing_muse_glimmer.py: 8 frames at 4 fps; (num_frames, fps) -> frames.
    CHECK(gl_video_sample_count(8, 4.0, 2.0, 3) == 2);
    CHECK(gl_video_sample_count(8, 4.0, 2.0, 4) == 4);
    CHECK(gl_video_sample_count(8, 4.0, 2.0, 8) == 4);
    CHECK(gl_video_sample_count(8, 4.0, 4.0, 8) == 8);
    CHECK(gl_video_sample_count(8, 4.0, 1.0, 8) == 2);
    // No fps metadata: 24 is assumed; 48 frames at 2 fps -> 4 (test ..._defaults_to_24).
    CHECK(gl_video_sample_count(48, GL_VIDEO_DEFAULT_FPS, 2.0, 96) == 4);
    // Floor 2, never above the frames there are, the 96 cap, odd budgets round down.
    CHECK(gl_video_sample_count(1, 30.0, 2.0, 96) == 1);
    CHECK(gl_video_sample_count(2, 30.0, 2.0, 96) == 2);
    CHECK(gl_video_sample_count(15, 30.0, 2.0, 96) == 2);    // 0.5 s: int(1.0) = 1 -> 2
    CHECK(gl_video_sample_count(1800, 30.0, 2.0, 96) == 96); // 60 s
    CHECK(gl_video_sample_count(75, 25.0, 2.0, 96) == 6);    // 3 s -> 6
    CHECK(gl_video_sample_count(88, 25.0, 2.0, 96) == 6);    // int(7.04) = 7 -> 6
    CHECK(gl_video_sample_count(100, 30.0, 2.0, 5) == 4);
    CHECK(gl_video_sample_count(0, 30.0, 2.0, 96) == 0);
}

TEST(test_sample_indices)
{
    int64_t idx[1024];
    gl_video_sample_indices(48, 4, idx); // linspace(0, 47, 4) = 0, 15.67, 31.33, 47
    CHECK(idx[0] == 0 && idx[1] == 15 && idx[2] == 31 && idx[3] == 47);
    // The fused upper half: linspace(0, 16, 15)[7] is 8 exactly, computed 7.9999995 -> 7 (torch
    // gives 7; rounding product and difference separately would give 8). Same for (0, 32, 15).
    gl_video_sample_indices(17, 15, idx);
    CHECK(idx[6] == 6 && idx[7] == 7 && idx[8] == 9 && idx[14] == 16);
    gl_video_sample_indices(33, 15, idx);
    CHECK(idx[7] == 15);
    gl_video_sample_indices(1, 1, idx);
    CHECK(idx[0] == 0);
    gl_video_sample_indices(7, 1, idx);
    CHECK(idx[0] == 0);
    // Properties over a range of clips: starts at 0, ends at total - 1, strictly increasing
    // (n <= total), and n == total is the identity.
    for (int64_t total = 1; total <= 400; total += 3)
        for (int n = 1; n <= 96 && n <= total; n++) {
            gl_video_sample_indices(total, n, idx);
            int ok = idx[0] == 0 && (n == 1 || idx[n - 1] == total - 1);
            for (int i = 1; i < n; i++)
                ok = ok && idx[i] > idx[i - 1] && idx[i] < total;
            if (n == total)
                for (int i = 0; i < n; i++)
                    ok = ok && idx[i] == i;
            CHECKF(ok, "total %lld n %d", (long long)total, n);
        }
}

TEST(test_prompt_layout)
{
    const double ts[3] = {0.0, 1.0, 12.25};
    struct gl_video_piece pc[16];
    CHECK(gl_video_prompt_layout(ts, 3, 36, NULL, 0) == 10);
    REQUIRE(gl_video_prompt_layout(ts, 3, 36, pc, 16) == 10);
    CHECK(pc[0].kind == GL_VIDEO_PIECE_TOKEN && pc[0].token == GL_VIDEO_TOK_START &&
          pc[0].count == 1);
    CHECK(pc[1].kind == GL_VIDEO_PIECE_TEXT && !strcmp(pc[1].text, "Time: 0.0s"));
    CHECK(pc[2].kind == GL_VIDEO_PIECE_TOKEN && pc[2].token == GL_VIDEO_TOK_VIDEO &&
          pc[2].count == 36);
    CHECK(pc[3].token == GL_VIDEO_TOK_SEP && pc[3].count == 1);
    CHECK(!strcmp(pc[4].text, "Time: 1.0s"));
    CHECK(pc[6].token == GL_VIDEO_TOK_SEP);
    CHECK(!strcmp(pc[7].text, "Time: 12.2s")); // 12.25 is exact: half to even, as Python
    CHECK(pc[9].kind == GL_VIDEO_PIECE_TOKEN && pc[9].token == GL_VIDEO_TOK_END);
    // A short array gets the first pieces only; bad arguments are refused.
    struct gl_video_piece two[2];
    CHECK(gl_video_prompt_layout(ts, 3, 36, two, 2) == 10 && two[1].kind == GL_VIDEO_PIECE_TEXT);
    CHECK(gl_video_prompt_layout(ts, 0, 36, pc, 16) == -1);
    CHECK(gl_video_prompt_layout(ts, 1, 0, pc, 16) == -1);
    char buf[32];
    gl_video_time_text(0.05, buf); // the double just above 0.05
    CHECK(!strcmp(buf, "Time: 0.1s"));
    gl_video_time_text((double)(47.0f / 24.0f), buf);
    CHECK(!strcmp(buf, "Time: 2.0s"));
}

TEST(test_decode_clip)
{
    size_t n;
    uint8_t *p = t_read_file(CORPUS "testsrc2_96x64_25fps_3s.mp4", &n);
    REQUIRE(p);
    struct gl_video v;
    struct gl_err err = {0};
    gl_status st = gl_video_preprocess(p, n, NULL, NULL, &v, &err);
    REQUIRE(st == GL_OK);
    // 75 frames at 25 fps: 6 sampled, linspace(0, 74, 6) -> 0, 14, 29, 44, 59, 74.
    CHECK(v.total_frames == 75 && v.fps_known && v.src_fps == 25.0);
    CHECK(v.n_sampled == 6 && v.n_frames == 6);
    CHECK(v.indices[0] == 0 && v.indices[1] == 14 && v.indices[5] == 74);
    CHECK(v.src_width == 96 && v.src_height == 64);
    // 96x64 is 3.43 x 2.29 units: candidates 2x3 .. 3x4; 2x3 has aspect 0.667 = 64/96.
    CHECK(v.grid.gh == 2 && v.grid.gw == 3 && v.width == 84 && v.height == 56);
    CHECK(v.timestamps[0] == 0.0);
    char t[32];
    gl_video_time_text(v.timestamps[1], t); // frame 29 / 25 = 1.16
    CHECK(!strcmp(t, "Time: 1.2s"));
    float *patches;
    size_t np;
    REQUIRE(gl_video_patchify(&v, &patches, &np, &err) == GL_OK);
    CHECK(np == 3u * 4u * 6u);
    // Patch 0 of group 1: slab 0 is frame 2's top-left 14x14, slab 1 frame 3's.
    const float *q = patches + GL_IMAGE_PATCH_DIM * (size_t)(4 * 6);
    const uint8_t *f2 = v.rgb + 2 * 3 * (size_t)v.width * v.height;
    const uint8_t *f3 = v.rgb + 3 * 3 * (size_t)v.width * v.height;
    CHECK(q[0] == ((float)f2[0] - 127.5f) / 127.5f);
    CHECK(q[3 * 14 * 14] == ((float)f3[0] - 127.5f) / 127.5f);
    CHECK(q[2 * 14 * 14 + 14 + 1] == ((float)f2[3 * (1 * v.width + 1) + 2] - 127.5f) / 127.5f);
    gl_free(patches);
    gl_video_free(&v);
    CHECK(is_zeroed(&v));
    gl_video_free(&v); // twice is fine
    free(p);
}

TEST(test_one_frame_is_padded)
{
    size_t n;
    uint8_t *p = t_read_file(CORPUS "one_frame_40x30.mkv", &n);
    REQUIRE(p);
    struct gl_video v;
    struct gl_err err = {0};
    REQUIRE(gl_video_preprocess(p, n, NULL, NULL, &v, &err) == GL_OK);
    CHECK(v.total_frames == 1 && v.n_sampled == 1 && v.n_frames == 2);
    const size_t bytes = 3 * (size_t)v.width * v.height;
    CHECK(!memcmp(v.rgb, v.rgb + bytes, bytes));
    gl_video_free(&v);
    free(p);
}

TEST(test_refusals)
{
    static const uint8_t junk[] = "this is not a video file, just some bytes of text........";
    check_refused(NULL, 0, NULL, NULL, GL_E_FORMAT);
    check_refused(junk, 0, NULL, NULL, GL_E_FORMAT);
    check_refused(junk, sizeof junk, NULL, NULL, GL_E_FORMAT);
    uint8_t zeros[4096] = {0};
    check_refused(zeros, sizeof zeros, NULL, NULL, GL_E_FORMAT);
    // An MP4 signature with nothing after it.
    static const uint8_t ftyp[] = {0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'i', 's', 'o', 'm',
                                   0, 0, 2, 0,    'i', 's', 'o', 'm', 'm', 'p', '4', '1'};
    check_refused(ftyp, sizeof ftyp, NULL, NULL, GL_E_FORMAT);
    // Playlists and concat lists would make FFmpeg open other files: not on the demuxer list.
    static const char hls[] = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\n"
                              "file:///etc/hostname\n#EXT-X-ENDLIST\n";
    static const char concat[] = "ffconcat version 1.0\nfile /etc/hostname\n";
    check_refused((const uint8_t *)hls, sizeof hls - 1, NULL, NULL, GL_E_FORMAT);
    check_refused((const uint8_t *)concat, sizeof concat - 1, NULL, NULL, GL_E_FORMAT);
}

TEST(test_truncations)
{
    size_t n;
    uint8_t *p = t_read_file(CORPUS "testsrc2_96x64_25fps_3s.mp4", &n);
    REQUIRE(p);
    // Every prefix (a coarse stride, then the last bytes one by one): success or a clean
    // refusal, never a crash; a success still has a consistent geometry.
    int ok = 0, refused = 0;
    for (size_t k = 0; k < n; k += (k + 64 < n ? 61 : 1)) {
        uint8_t *cut = malloc(k ? k : 1); // its own allocation, so ASan sees reads past it
        memcpy(cut, p, k);
        struct gl_video v;
        struct gl_err err = {0};
        if (gl_video_preprocess(cut, k, NULL, NULL, &v, &err) == GL_OK) {
            CHECK(v.n_frames >= 2 && v.n_frames % 2 == 0 && v.rgb);
            gl_video_free(&v);
            ok++;
        } else {
            CHECKF(!strncmp(err.msg, "video: ", 7) && is_zeroed(&v), "cut %zu: %s", k, err.msg);
            refused++;
        }
        free(cut);
    }
    CHECK(refused > 0);
    printf("  truncations: %d decoded, %d refused\n", ok, refused);
    free(p);
}

TEST(test_limits_and_params)
{
    size_t n;
    uint8_t *p = t_read_file(CORPUS "testsrc2_96x64_25fps_3s.mp4", &n);
    REQUIRE(p);
    const struct gl_video_limits d = gl_video_default_limits();
    struct gl_video_limits l;
    l = d, l.max_bytes = n - 1;
    check_refused(p, n, &l, NULL, GL_E_LIMIT);
    l = d, l.max_side = 95;
    check_refused(p, n, &l, NULL, GL_E_LIMIT);
    l = d, l.max_pixels = 96 * 64 - 1;
    check_refused(p, n, &l, NULL, GL_E_LIMIT);
    l = d, l.max_frames = 74;
    check_refused(p, n, &l, NULL, GL_E_LIMIT);
    l = d, l.max_duration_s = 2.9;
    check_refused(p, n, &l, NULL, GL_E_LIMIT);
    l = d, l.max_decode_pixels = 96 * 64 * 74;
    check_refused(p, n, &l, NULL, GL_E_LIMIT);
    struct gl_video_params par = gl_video_default_params();
    par.fps = 0.0;
    check_refused(p, n, NULL, &par, GL_E_INVAL);
    par = gl_video_default_params(), par.max_frames = 0;
    check_refused(p, n, NULL, &par, GL_E_INVAL);
    par = gl_video_default_params(), par.max_frame_tokens = GL_IMAGE_MAX_TOKENS_LIMIT + 1;
    check_refused(p, n, NULL, &par, GL_E_INVAL);
    // Within the limits exactly: decodes.
    l = d, l.max_frames = 75, l.max_decode_pixels = 96 * 64 * 75, l.max_side = 96;
    struct gl_video v;
    struct gl_err err = {0};
    CHECKF(gl_video_preprocess(p, n, &l, NULL, &v, &err) == GL_OK, "%s", err.msg);
    gl_video_free(&v);
    free(p);
}

int main(void)
{
    RUN_TESTS(test_sample_count_hf_cases, test_sample_indices, test_prompt_layout, test_decode_clip,
              test_one_frame_is_padded, test_refusals, test_truncations, test_limits_and_params);
}
