# SPDX-License-Identifier: MIT
"""Video preprocessing oracle (see check_video.sh): glint vs ffprobe/ffmpeg CLI, torch and Pillow.

usage: video_ref.py GLINT WORKDIR

Independent of glint's C code: frame counts and rates come from ffprobe (counted packets,
avg_frame_rate), the sample count from a float64 port of HF MuseGlimmerVideoProcessor.sample_frames,
the indices from a float32 emulation of torch 2.x's linspace kernel (Debian's torch is 1.13, whose
kernel was vectorised; the sweep checks our model of that older kernel against the installed
torch, so the emulation rests on a verified reading of the kernel source), timestamps as
HF computes them (int64 tensor / float -> float32, then "{:.1f}"), the grid from a port of HF's
smart_resize, the prompt text from a port of MuseGlimmerProcessor.replace_video_token, the frames from `ffmpeg -vf select=eq(n,K),scale=flags=bilinear,format=rgb24`
resized with Pillow's LANCZOS, the patch vectors from a numpy port of HF's patchify with the fused
float32 (x - 127.5) / 127.5 normalisation.
"""
import itertools
import json
import math
import os
import subprocess
import sys

import numpy as np
from PIL import Image

try:
    import torch
except ImportError:  # timestamps then use numpy float32; the linspace sweep is skipped
    torch = None

FPS, MAX_FRAMES, MAX_TOKENS, UNIT = 2.0, 96, 144, 28

# name, lavfi source, encoder arguments, container; each clip exercises something named.
CLIPS = [
    ("h264_320x240_30fps_4s", "testsrc2=size=320x240:rate=30:duration=4",
     ["-c:v", "libx264", "-pix_fmt", "yuv420p"], "mp4"),
    ("h264_640x360_30fps_2s_capped", "testsrc2=size=640x360:rate=30:duration=2",
     ["-c:v", "libx264", "-pix_fmt", "yuv420p"], "mp4"),
    ("mpeg4_176x144_25fps_55frames", "testsrc2=size=176x144:rate=25",
     ["-frames:v", "55", "-c:v", "mpeg4", "-q:v", "3"], "avi"),
    ("ffv1_64x48_10fps_7frames_under_1s", "testsrc2=size=64x48:rate=10",
     ["-frames:v", "7", "-c:v", "ffv1"], "mkv"),
    ("vp9_160x90_15fps_3s", "testsrc2=size=160x90:rate=15:duration=3",
     ["-c:v", "libvpx-vp9", "-b:v", "300k", "-deadline", "realtime", "-cpu-used", "8"], "webm"),
    ("h264_64x36_30fps_60s_over_cap", "testsrc2=size=64x36:rate=30:duration=60",
     ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"], "mp4"),
    ("ffv1_97x55_ntsc_2s_odd_size", "testsrc2=size=97x55:rate=24000/1001:duration=2",
     ["-c:v", "ffv1", "-pix_fmt", "yuv420p"], "mkv"),
    ("mjpeg_128x96_12fps_fullrange", "testsrc2=size=128x96:rate=12:duration=2",
     ["-c:v", "mjpeg", "-pix_fmt", "yuvj420p", "-q:v", "3"], "avi"),
    ("h264_256x144_bt709_tagged", "testsrc2=size=256x144:rate=60:duration=1.5",
     ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-colorspace", "bt709",
      "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"], "mp4"),
    ("h264_320x180_50fps_ts", "testsrc2=size=320x180:rate=50:duration=1.3",
     ["-c:v", "libx264", "-pix_fmt", "yuv420p"], "ts"),
    ("gif_80x60_10fps", "testsrc2=size=80x60:rate=10:duration=1.5", [], "gif"),
    ("ffv1_40x30_one_frame", "testsrc2=size=40x30:rate=25", ["-frames:v", "1", "-c:v", "ffv1"],
     "mkv"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


def make_clip(work, name, src, enc, ext):
    path = os.path.join(work, f"{name}.{ext}")
    if not os.path.exists(path):
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", src, *enc, path + f".tmp.{ext}"])
        os.replace(path + f".tmp.{ext}", path)
    return path


def probe(path):
    """Frame count (packets read) and fps (avg_frame_rate, else r_frame_rate, else None)."""
    out = run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_packets",
               "-show_entries", "stream=avg_frame_rate,r_frame_rate,nb_read_packets",
               "-of", "json", path]).stdout
    s = json.loads(out)["streams"][0]
    fps = None
    for key in ("avg_frame_rate", "r_frame_rate"):
        num, _, den = s.get(key, "0/0").partition("/")
        if int(num) > 0 and int(den or 1) > 0:
            fps = int(num) / int(den or 1)
            break
    return int(s["nb_read_packets"]), fps


def hf_sample_count(total, src_fps, fps=FPS, max_frames=MAX_FRAMES):
    # MuseGlimmerVideoProcessor.sample_frames (defaults fps=2.0, num_frames=96), temporal patch 2.
    n = min(int(total * fps / src_fps), max_frames, total)
    n = max(2, (n // 2) * 2)
    return min(n, total)


def linspace_emulated(total, n, fma=True):
    """torch 2.x's CPU linspace for float32 (RangeFactoriesKernel.cpp, scalar): start + step*i
    below n//2, end - step*(n-1-i) above, step = (end-start)/(n-1); with fma=True (torch's
    x86-64/aarch64 builds: GCC contracts the upper half into one fused multiply-add) the upper
    half is rounded once, else product and difference are rounded separately."""
    f = np.float32
    start, end = f(0), f(total - 1)
    if n == 1:
        return [0]
    step = f(end - start) / f(n - 1)
    out = []
    for i in range(n):
        if i < n // 2:
            v = start + step * f(i)
        elif fma:  # step * k is exact in float64 (24 x 17 bits), so one rounding to float32
            v = f(float(end) - float(step) * (n - 1 - i))
        else:
            v = end - step * f(n - 1 - i)
        out.append(int(v))
    return out


def linspace_torch113(total, n):
    """torch 1.13's kernel (Debian 12's python3-torch): the same, except that blocks of 2 x 8
    values (AVX2 Vectorized<float>) start from the block's first value and add j * step."""
    f = np.float32
    start, end = f(0), f(total - 1)
    if n == 1:
        return [0]
    step = f(end - start) / f(n - 1)
    half = n // 2

    def scalar(i):
        return start + step * f(i) if i < half else f(float(end) - float(step) * (n - 1 - i))

    out = [scalar(i) for i in range(n)]
    for i in range(0, n - 15, 16):
        for b in (i, i + 8):
            base = scalar(b)
            for j in range(8):
                out[b + j] = base + f(j) * step
    return [int(v) for v in out]


def hf_indices(total, n):
    """The reference: torch 2.x's kernel, emulated (the installed torch may be older)."""
    return linspace_emulated(total, n)


def hf_timestamps(indices, src_fps):
    # metadata.timestamps[::2]: each int64 tensor element / Python float -> float32, "{:.1f}".
    if torch is not None:
        t = torch.tensor(indices, dtype=torch.long)
        return [f"{float(x / src_fps):.1f}" for x in t[::2]]
    return [f"{float(np.float32(i) / np.float32(src_fps)):.1f}" for i in indices[::2]]


def hf_grid(height, width, max_tokens=MAX_TOKENS):
    """HF smart_resize (video_processing_muse_glimmer.py), in merged-token units."""
    ih, iw = height / UNIT, width / UNIT
    ratio = iw / ih if ih > 0 else 1.0
    if ih * iw > max_tokens:
        ih = (max_tokens / ratio) ** 0.5
        iw = ih * ratio
    cands = set(itertools.product([math.floor(ih), math.ceil(ih)], [math.floor(iw), math.ceil(iw)]))
    cands = [(a, b) for a, b in cands if a >= 1 and b >= 1 and a * b <= max_tokens]
    if not cands:
        cands = [(max(1, round(ih)), max(1, round(iw)))]
    return min(cands, key=lambda g: abs(g[0] / g[1] - height / width))


def hf_replace_video_token(grid_thw, ts_text):
    """MuseGlimmerProcessor.replace_video_token, with the timestamps already formatted."""
    n_frames, tokens = grid_thw[0], grid_thw[1] * grid_thw[2] // 4
    ts = list(ts_text[:n_frames])
    while len(ts) < n_frames:
        ts.append(ts[-1] if ts else "0.0")
    s = "<|vid_start|>"
    for g, t in enumerate(ts):
        s += f"Time: {t}s" + "<|video|>" * tokens
        s += "<|vid_frame_separator|>" if g < n_frames - 1 else "<|vid_end|>"
    return s


def ffmpeg_frames(path, indices, width, height):
    """The frames numbered `indices` as the ffmpeg CLI decodes them: `select` picks them when
    there are few (its expression parser fails past ~100 terms), else every frame is written
    and picked here (the same numbering: frames in decoder output order, passed through)."""
    keys = sorted(set(indices))
    sel = f"select='{'+'.join(f'eq(n,{k})' for k in keys)}'," if len(keys) <= 48 else ""
    raw = run(["ffmpeg", "-v", "error", "-i", path, "-vf", f"{sel}scale=flags=bilinear,format=rgb24",
               "-fps_mode", "passthrough", "-f", "rawvideo", "-"]).stdout
    frames = np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)
    by_index = dict(zip(keys, frames)) if sel else dict(enumerate(frames))
    return [by_index[k] for k in indices]


def hf_patchify(frames):
    """frames: T,H,W,3 uint8 (T even) -> [T/2 * H/14 * W/14, 1176] float32 (HF layout)."""
    x = (frames.astype(np.float32) - np.float32(127.5)) / np.float32(127.5)
    t, h, w, _ = x.shape
    x = x.transpose(0, 3, 1, 2)  # T, C, H, W
    x = x.reshape(t // 2, 2, 3, h // 14, 14, w // 14, 14)
    x = x.transpose(0, 3, 5, 1, 2, 4, 6)  # groups, gh, gw, temporal, channel, row, col
    return x.reshape(-1, 2 * 3 * 14 * 14)


def check_sweep():
    """Our reading of torch's kernel, checked against the installed torch over many (total, n):
    the torch 1.13 emulation must equal it everywhere (else the model of the kernel is wrong);
    also counts where 1.13 and the torch 2.x kernel (glint's) differ."""
    if torch is None:
        return "torch missing: linspace sweep skipped"
    bad = differ = pairs = 0
    for total in list(range(1, 300)) + list(range(300, 200000, 1999)):
        for n in range(1, min(MAX_FRAMES, total) + 1):
            pairs += 1
            ref = torch.linspace(0, total - 1, n).long().tolist()
            differ += ref != linspace_emulated(total, n)
            if torch.__version__.startswith("1.13") and ref != linspace_torch113(total, n):
                bad += 1
                if bad <= 5:
                    print(f"  torch {torch.__version__} linspace not as modelled: total {total} n {n}")
    if bad:
        return None
    return (f"linspace sweep vs torch {torch.__version__}: {pairs}/{pairs} (total, n) pairs as "
            f"modelled; the torch 2.x kernel differs from it on {differ}")


def check_clip(glint, work, spec, stats, rate=FPS, max_frames=MAX_FRAMES):
    """One glint run at sampling rate `rate` (fps) and cap `max_frames` against the references."""
    name = spec[0] + ("" if (rate, max_frames) == (FPS, MAX_FRAMES) else f" (fps {rate}, max {max_frames})")
    path = make_clip(work, *spec)
    total, fps = probe(path)
    src_fps = fps if fps else 24.0
    raw = os.path.join(work, name + ".rgb")
    pat = os.path.join(work, name + ".f32")
    out = run([glint, "video", "preprocess", path, "--out", raw, "--patches", pat, "--prompt",
               "--fps", repr(rate), "--max-frames", str(max_frames)]).stdout
    j = json.loads(out)
    errs = []
    n = hf_sample_count(total, src_fps, rate, max_frames)
    idx = hf_indices(total, n)
    if j["total_frames"] != total:
        errs.append(f"total_frames {j['total_frames']} != ffprobe {total}")
    if j["fps_known"] != (fps is not None) or (fps and abs(j["src_fps"] - fps) > 1e-12):
        errs.append(f"fps {j['src_fps']} (known {j['fps_known']}) != ffprobe {fps}")
    if j["indices"] != idx:
        errs.append(f"indices {j['indices']} != HF {idx}")
    if torch is not None and torch.linspace(0, total - 1, n).long().tolist() != idx:
        print(f"      (torch {torch.__version__} itself gives "
              f"{torch.linspace(0, total - 1, n).long().tolist()})")
    ts = hf_timestamps(idx, src_fps)
    if [f"{t:.1f}" for t in j["timestamps"]] != ts:
        errs.append(f"timestamps {j['timestamps']} != HF {ts}")
    gh, gw = hf_grid(j["src_height"], j["src_width"])
    T = n + (n % 2)
    want = {"frames": T, "width": gw * UNIT, "height": gh * UNIT, "grid_thw": [T // 2, 2 * gh, 2 * gw],
            "n_tokens": T // 2 * gh * gw}
    for k, v in want.items():
        if j[k] != v:
            errs.append(f"{k} {j[k]} != {v}")
    hp_text = hf_replace_video_token(want["grid_thw"], ts)
    if j["prompt"] != hp_text:
        errs.append(f"prompt differs from HF's replace_video_token: {j['prompt'][:120]}...")
    W, H = j["width"], j["height"]
    got = np.fromfile(raw, np.uint8).reshape(T, H, W, 3)
    ref_native = ffmpeg_frames(path, idx, j["src_width"], j["src_height"])
    ref_native += [ref_native[-1]] * (T - n)  # HF pads by repeating the last frame
    ref = np.stack([np.asarray(Image.fromarray(f).resize((W, H), Image.LANCZOS)) for f in ref_native])
    diff = np.abs(got.astype(int) - ref.astype(int))
    stats["pixels"] += diff.size
    stats["pixels_off"] += int((diff != 0).sum())
    if diff.max() != 0:
        errs.append(f"pixels differ from ffmpeg+Pillow: max {diff.max()}, mean {diff.mean():.4f}, "
                    f"{(diff != 0).sum()} of {diff.size} values")
    pv = np.fromfile(pat, np.float32).reshape(-1, 1176)
    hp = hf_patchify(got)
    if pv.shape != hp.shape or not np.array_equal(pv, hp):
        errs.append(f"patches differ from HF patchify ({pv.shape} vs {hp.shape})")
    status = "ok" if not errs else "FAIL"
    print(f"  {status} {name}: {total} frames @ {fps}, sampled {n} {idx[:4]}{'...' if n > 4 else ''}"
          f" ts {ts[:3]}{'...' if len(ts) > 3 else ''}, grid {gh}x{gw}")
    for e in errs:
        print(f"      {e}")
    return not errs


def check_refusals(glint, work, clip):
    data = open(clip, "rb").read()
    cases = {"truncated_half": data[: len(data) // 2], "truncated_head": data[:200],
             "garbage": bytes((i * 131 + 7) % 256 for i in range(4000)), "empty": b""}
    bad = []
    for name, blob in cases.items():
        p = os.path.join(work, f"refuse_{name}.mp4")
        with open(p, "wb") as f:
            f.write(blob)
        r = subprocess.run([glint, "video", "preprocess", p], capture_output=True, text=True)
        if r.returncode != 1 or "video: " not in r.stderr:
            bad.append(f"{name}: rc {r.returncode} stderr {r.stderr.strip()!r}")
        else:
            print(f"  refused {name}: {r.stderr.strip()}")
    return bad


def main():
    glint, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    stats = {"pixels": 0, "pixels_off": 0}
    ok = 0
    for spec in CLIPS:
        try:
            ok += check_clip(glint, work, spec, stats)
        except subprocess.CalledProcessError as e:
            print(f"  FAIL {spec[0]}: {' '.join(e.cmd[:4])}...: {e.stderr.decode(errors='replace')}")
    # Other sampling parameters: an odd cap (rounded down to pairs), a cap of 1 (HF still takes 2),
    # fractional rates, and rates at the source's (96 of 120 frames; 90 of 90 at 60 fps).
    variants = [(CLIPS[5], 1.0, 31), (CLIPS[0], 7.5, 200), (CLIPS[2], 0.3, 1), (CLIPS[6], 3.0, 96),
                (CLIPS[0], 30.0, 96), (CLIPS[8], 60.0, 96)]
    for spec, fps, mf in variants:
        try:
            ok += check_clip(glint, work, spec, stats, fps, mf)
        except subprocess.CalledProcessError as e:
            print(f"  FAIL {spec[0]}: {e.stderr.decode(errors='replace')}")
    sweep = check_sweep()
    bad = check_refusals(glint, work, make_clip(work, *CLIPS[0]))
    for b in bad:
        print(f"  FAIL refusal {b}")
    print(f"video: {ok}/{len(CLIPS) + len(variants)} runs match (indices, timestamps, grid, tokens, prompt text, "
          f"{stats['pixels'] - stats['pixels_off']}/{stats['pixels']} pixel values, patches); "
          f"{sweep or 'linspace sweep FAILED'}; {4 - len(bad)}/4 refusals")
    sys.exit(0 if ok == len(CLIPS) + len(variants) and sweep and not bad else 1)


if __name__ == "__main__":
    main()
