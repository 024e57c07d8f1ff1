#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Deterministic: rerun it after changing a seed or the wire schema and commit the
result. Needs protoc (Debian: protobuf-compiler; the build needs it anyway) to
encode the text-format messages below; XXH3 checksums of full frames come from
libxxhash (the build's own dependency) through ctypes; without it the raw-frame
seeds are skipped (the targets' wrapped-frame modes compute checksums themselves).

Layouts of each target's input are documented at the top of its .cpp file.
"""
import ctypes
import ctypes.util
import pathlib
import shutil
import struct
import subprocess
import sys

FUZZ = pathlib.Path(__file__).resolve().parent
ROOT = FUZZ.parent
CORPUS = FUZZ / "corpus"
PROTO_DIR = ROOT / "proto"


def encode(message_type, text):
    """Serialized bytes of a text-format longhaul.v1 message (protoc --encode)."""
    proto = "longhaul/v1/control.proto" if message_type != "DataFrame" else "longhaul/v1/data.proto"
    out = subprocess.run(
        ["protoc", f"-I{PROTO_DIR}", f"--encode=longhaul.v1.{message_type}", proto],
        input=text.encode(), stdout=subprocess.PIPE, check=True, cwd=PROTO_DIR)
    return out.stdout


def load_xxh3():
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            fn = lib.XXH3_64bits
            fn.restype = ctypes.c_uint64
            fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            return lambda b: fn(b, len(b))
        except (OSError, AttributeError):
            continue
    return None


XXH3 = load_xxh3()


def frame(payload):
    """proto/frame.h: "LHF1" | u32 length | u64 XXH3 | payload."""
    return b"LHF1" + struct.pack("<IQ", len(payload), XXH3(payload)) + payload


def u16(n):
    return struct.pack("<H", n)


def record(payload, extra=b""):
    """frame_fuzz record: u16 n, n bytes of protobuf, u16 m, m bytes of chunk payload."""
    return u16(len(payload)) + payload + u16(len(extra)) + extra


def op(kind, who=0, role=0, tick=False):
    """control_fuzz record op byte."""
    return bytes([kind | (who << 2) | (role << 4) | (0x40 if tick else 0)])


def control_record(kind, who, role, text, tick=False):
    body = encode("ControlMessage", text)
    return op(kind, who, role, tick) + u16(len(body)) + body


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


JOB = "job-000001"
SPEC = ('name: "fuzz" rounds: 3 region_count: 3 min_regions: 2 model_preset: "tiny" '
        'data { synthetic { seed: 7 branching: 4 order: 1 } } '
        'inner { name: "adamw" lr: 0.01 batch_size: 4 } outer { name: "nesterov" lr: 0.7 momentum: 0.9 } '
        'sync { kind: "diloco" inner_steps: 5 } compression { codec: CODEC_INT8_BLOCK block_size: 64 }')


def frame_seeds():
    hb = encode("ControlMessage", 'protocol_version: 1 sender: "a" heartbeat { region: "a" seq: 3 healthy: true }')
    submit = encode("ControlMessage", f'protocol_version: 1 sender: "cli" request_id: 1 submit_job {{ spec {{ {SPEC} }} }}')
    p0, p1 = bytes(range(6)), bytes(range(6, 10))

    def chunk(index, offset, payload, checksum):
        return encode("DataFrame", (
            f'protocol_version: 1 chunk {{ protocol_version: 1 job_id: "{JOB}" round: 1 epoch: 1 shard: 0 '
            f'transfer_id: 7 offset: {offset} length: {len(payload)} total_bytes: 10 chunk_index: {index} '
            f'chunk_count: 2 codec: CODEC_INT8_BLOCK checksum: {checksum} }}'))

    ctl = encode("DataFrame", 'protocol_version: 1 control { protocol_version: 1 transfer_id: 7 resend_chunks: [0, 1] '
                              'error { code: ERROR_CODE_DATA_LOSS message: "chunk 1 failed its checksum" } }')
    # Mode 5: wrapped frames, chunk checksums fixed up by the target.
    write("frame", "wrapped_two_chunks", b"\x05" + record(chunk(0, 0, p0, 0), p0) + record(chunk(1, 6, p1, 0), p1))
    write("frame", "wrapped_control", b"\x01" + record(ctl) + record(submit))
    write("frame", "raw_bad_checksum", b"\x00LHF1" + struct.pack("<IQ", 3, 12345) + b"abc")
    if XXH3 is None:
        print("make_corpus: libxxhash not found; raw-frame seeds skipped", file=sys.stderr)
        return
    write("frame", "raw_heartbeat", b"\x00" + frame(hb))
    c0 = chunk(0, 0, p0, XXH3(p0))
    write("frame", "raw_chunk", b"\x00" + frame(c0))
    write("frame", "wrapped_two_chunks_real_checksums", b"\x01" + record(c0, p0) + record(chunk(1, 6, p1, XXH3(p1)), p1))


def codec_seeds():
    n, block = 8, 4
    floats = [0.5, -1.25, 3.0, 0.0, -0.75, 2.5, -3.5, 1.0]
    nb = (n + block - 1) // block
    scales = struct.pack("<2f", 3.0 / 127, 3.5 / 127)

    def header(codec, flags=1, frac=64):
        return bytes([codec]) + u16(n) + u16(block) + bytes([frac, flags])

    write("codec", "fp32", header(0) + struct.pack("<8f", *floats))
    bf16 = b"".join(struct.pack("<f", f)[2:] for f in floats)
    write("codec", "bf16", header(1) + bf16)
    write("codec", "int8", header(2) + scales + bytes([21, 203, 127, 0, 229, 91, 129, 36]))
    nibbles = bytes([0x2d, 0x07, 0x59, 0xa3])  # 8 nibbles, two per byte
    write("codec", "int4", header(3) + struct.pack("<2f", 3.0 / 7, 3.5 / 7) + nibbles)
    write("codec", "fp4", header(4) + struct.pack("<2f", 3.0, 3.5) + bytes([0xe6, 0x07, 0xd6, 0x7f]))
    k = 3  # ceil(64 / 255 * 8)
    topk = struct.pack("<I", k) + struct.pack("<3I", 2, 5, 6) + struct.pack("<3f", 3.0, 2.5, -3.5)
    write("codec", "topk", header(5) + topk)
    bad = struct.pack("<I", k) + struct.pack("<3I", 6, 5, 9) + struct.pack("<3f", 1, 2, 3)
    write("codec", "topk_bad_indices", header(5) + bad)
    # topk2: the same entries; positives 2.5 | 3.0, negative -3.5 alone in its
    # larger half; codes 1, 0, 3 in one byte.
    topk2 = struct.pack("<I", k) + struct.pack("<3I", 2, 5, 6) + struct.pack("<4f", 2.5, 3.0, 0.0, -3.5)
    write("codec", "topk2", header(6) + topk2 + bytes([0x31]))
    write("codec", "topk2_bad_code", header(6) + topk2 + bytes([0xf1]))  # bits past the 3rd code set
    write("codec", "int8_short", header(2, flags=0) + scales + b"\x01\x02")
    assert nb == 2


def job_spec_seeds():
    for src, name in ((ROOT / "deploy/examples/diloco-3-regions.yaml", "diloco_3_regions.yaml"),
                      (ROOT / "examples/pytorch/job.yaml", "pytorch_command.yaml")):
        if src.exists():
            write("job_spec", name, src.read_bytes())
    write("job_spec", "minimal.yaml", b"rounds: 3\n")
    write("job_spec", "streaming.yaml", (
        b"name: streaming\nrounds: 4\nregion_count: 3\nmin_regions: 2\n"
        b"sync: {kind: streaming_diloco, inner_steps: 40, fragments: 4, overlap_steps: 2, mixing_alpha: 0.5,\n"
        b"       adaptive: {target_utilisation: 0.6, max_inner_steps: 160, codecs: [int8, int4], max_overlap_steps: 4}}\n"
        b"compression: {codec: topk, topk_fraction: 0.05}\n"
        b"outer: {name: nesterov, lr: 0.7, momentum: 0.9, warmup_rounds: 1, lr_decay: cosine, final_lr_fraction: 0.1}\n"))
    write("job_spec", "custom_worker.yaml", (
        b"rounds: 2\nworker: {preset: small, context: 16, embed: 48, hidden: 768, layers: 3}\n"
        b"data: {synthetic: {seed: 3, branching: 2, order: 2, non_iid: true}}\n"))
    write("job_spec", "duplicate_key.yaml", b"rounds: 3\nrounds: 4\n")
    write("job_spec", "wire_spec", b"\x00" + encode("JobSpec", SPEC))


def control_seeds():
    # Bit 0: regions a, b, c registered; bit 1: job-000001 running round 1 epoch 1.
    reg_a = ('protocol_version: 1 sender: "a" register_region { region: "a" capacity { workers: 2 } '
             'data_host: "10.0.0.4" session_id: "s1" }')
    write("control", "register_and_heartbeat",
          b"\x00" + control_record(1, 0, 0, reg_a)
          + control_record(2, 0, 1, 'heartbeat { region: "a" seq: 1 healthy: true }')
          + op(3) + u16(50))
    write("control", "submit_cancel_status", b"\x01" + control_record(2, 3, 2, f'request_id: 4 submit_job {{ spec {{ {SPEC} }} idempotency_key: "k-1" }}', tick=True)
          + control_record(2, 3, 2, f'list_jobs {{ page_size: 10 }}')
          + control_record(2, 3, 2, f'job_status_request {{ job_id: "{JOB}" }}')
          + control_record(2, 3, 3, f'cancel_job {{ job_id: "{JOB}" }}')
          + control_record(2, 3, 0, 'list_regions { }'))
    reports = b"".join(
        control_record(2, i, 1, f'round_report {{ job_id: "{JOB}" round: 1 epoch: 1 region: "{r}" ok: true '
                                f'param_hash: "00000000deadbeef" loss: 2.9 val_loss: 3.0 tokens: 1000 wan_bytes_sent: 4000 '
                                f'compute_seconds: 1.5 comm_seconds: 0.5 wall_seconds: 2.0 inner_steps: 5 }}')
        for i, r in enumerate("abc"))
    write("control", "running_round_commit", b"\x03" + reports + op(3) + u16(20))
    links = b"".join(
        control_record(2, i, 1, f'link_report {{ region: "{r}" ' + " ".join(
            f'links {{ peer: "{p}" bytes_per_second: 1e7 rtt_seconds: 0.05 }}' for p in "abc" if p != r) + " }")
        for i, r in enumerate("abc"))
    facts = control_record(2, 0, 1, f'job_facts {{ job_id: "{JOB}" region: "a" parameter_count: 30000 payload_bytes: 31000 loss_floor: 1.2 }}')
    write("control", "links_and_facts", b"\x03" + links + facts + op(3) + u16(600))
    rejected = control_record(2, 1, 1, f'job_rejected {{ job_id: "{JOB}" region: "b" error {{ code: ERROR_CODE_RESOURCE_EXHAUSTED message: "no slots" worker_output: "line 1\\nline 2" }} }}')
    ready = control_record(2, 2, 0, f'job_ready {{ job_id: "{JOB}" region: "c" endpoint {{ region: "c" shard_endpoints: "tcp://10.0.0.3:5555" }} }}')
    failed = control_record(2, 0, 1, f'round_report {{ job_id: "{JOB}" round: 1 epoch: 1 region: "a" ok: false error {{ code: ERROR_CODE_INTERNAL message: "worker 0 died" }} }}')
    write("control", "reject_and_fail", b"\x03" + rejected + ready + failed + op(3) + u16(100))
    write("control", "remove_region", b"\x01" + control_record(2, 3, 3, 'remove_region { region: "c" force: true }', tick=True)
          + control_record(2, 3, 2, 'remove_region { region: "b" }'))
    write("control", "raw_frame_garbage", b"\x00" + op(0) + u16(20) + b"LHF1" + bytes(16))


def agent_control_seeds():
    assignment = encode("ControlMessage", (
        f'protocol_version: 1 sender: "orchestrator" job_assignment {{ job_id: "{JOB}" region: "eu-west" region_index: 0 '
        f'start_round: 1 spec {{ {SPEC} workers_per_region: 1 }} }}'))
    command_job = encode("ControlMessage", (
        f'protocol_version: 1 job_assignment {{ job_id: "{JOB}" region: "eu-west" spec {{ name: "cmd" rounds: 2 region_count: 3 '
        f'min_regions: 2 worker {{ command {{ argv: ["/bin/true", "--x"] env {{ key: "A" value: "b" }} }} }} }} }}'))
    start = encode("ControlMessage", (
        f'protocol_version: 1 round_command {{ job_id: "{JOB}" round: 2 epoch: 3 kind: START '
        f'participants {{ region: "eu-west" shard_endpoints: "tcp://10.0.0.1:5000" }} connections_per_link: 2 }}'))
    err = encode("ControlMessage", 'protocol_version: 1 error { code: ERROR_CODE_STALE_EPOCH message: "epoch 2 < 3" }')
    w0 = encode("ControlMessage", f'protocol_version: 1 round_report {{ job_id: "{JOB}" round: 2 epoch: 3 ok: true param_hash: "aa" loss: 2.0 tokens: 10 }}')
    w1 = encode("ControlMessage", (
        f'protocol_version: 1 round_report {{ job_id: "{JOB}" round: 2 epoch: 3 ok: false param_hash: "bb" '
        f'error {{ code: ERROR_CODE_INTERNAL message: "boom" worker_output: "Traceback\\n  line 3\\x07" }} }}'))
    write("agent_control", "assignment", b"\x01" + u16(len(assignment)) + assignment)
    write("agent_control", "command_assignment", b"\x05" + u16(len(command_job)) + command_job)
    write("agent_control", "start_error_reports", b"\x01" + b"".join(u16(len(m)) + m for m in (start, err, w0, w1)))


def safetensors_seeds():
    def st(header, data):
        text = header.encode()
        text += b" " * ((8 - len(text) % 8) % 8)
        return struct.pack("<Q", len(text)) + text + data

    w = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    b = struct.pack("<3f", 0.5, -0.5, 0.25)
    write("safetensors", "model", st(
        '{"__metadata__":{"round":"10","job":"job-000001"},'
        '"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},'
        '"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]}}', w + b))
    write("safetensors", "prefixed", st(
        '{"params.b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]},'
        '"params.w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}', w + b))
    write("safetensors", "scalar_and_empty", st(
        '{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]}}',
        struct.pack("<f", 7.0)))
    write("safetensors", "bad_dtype", st('{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}', b"\0" * 4))


def main():
    if shutil.which("protoc") is None:
        sys.exit("make_corpus: protoc not found (apt-get install protobuf-compiler)")
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    frame_seeds()
    codec_seeds()
    job_spec_seeds()
    control_seeds()
    agent_control_seeds()
    safetensors_seeds()
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    count = sum(1 for f in CORPUS.rglob("*") if f.is_file())
    print(f"make_corpus: {count} seeds, {total} bytes in {CORPUS}")


if __name__ == "__main__":
    main()
