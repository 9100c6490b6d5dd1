#!/usr/bin/env bash
# The numerics recorder and tenet-diverge on real runs of tenet-gpt (a tiny model, two steps):
#   threads   1 thread against 2: nothing parts, bit for bit; with GPT_PLANT=sum_order (an
#             order-dependent reduction) the comparer names PlantedRowSum and its call site;
#   gelu      the planted erf GELU of block 1 against the tanh one: named, with its call site;
#   autocast  bf16 autocast against float32: the runs part and the report ranks the ops;
#   cuda      --device cuda against the CPU: nothing parts beyond 2e-5 (Adam's amplification of
#             rounding, as against PyTorch); skipped (77) without a CUDA device;
#   torch     tenet-gpt float32 against PyTorch (scripts/torch_numerics.py over
#             scripts/gpt_reference.py's model) on the same weights and batches: no op parts
#             beyond float32 rounding; skipped (77) without torch.
# usage: numerics_diverge.sh CASE TENET_GPT TENET_GPT_PLANTED TENET_DIVERGE DATA_DIR SRC_DIR
set -uo pipefail
case_="$1" gpt="$2" planted="$3" diverge="$4" data="$5" src="$6"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
model=(--init "$data/init.safetensors" --tokens "$data/tokens.bin" --steps 2 --vocab 96
       --batch 4 --block 32 --layers 2 --heads 4 --embd 32)
fail() { echo "FAIL: $*"; exit 1; }
record() { # out exe args...
    local out="$1"; shift
    TENET_NUMERICS="$out" "$@" "${model[@]}" > "$work/log" 2>&1 || { cat "$work/log"; fail "run $*"; }
}
expect() { # status, then tenet-diverge's arguments
    local want="$1"; shift
    "$diverge" "$@" > "$work/report" 2>&1
    local got=$?
    cat "$work/report"
    [ "$got" = "$want" ] || fail "tenet-diverge $* exited $got, expected $want"
}
case "$case_" in
threads)
    record "$work/t1.jsonl" "$planted" --threads 1
    record "$work/t2.jsonl" "$planted" --threads 2
    expect 0 --rtol 0 "$work/t1.jsonl" "$work/t2.jsonl"
    GPT_PLANT=sum_order record "$work/s1.jsonl" "$planted" --threads 1
    GPT_PLANT=sum_order record "$work/s2.jsonl" "$planted" --threads 2
    expect 1 --rtol 0 "$work/s1.jsonl" "$work/s2.jsonl"
    grep -q 'first culprit: op "PlantedRowSum"' "$work/report" || fail "the culprit is not named"
    grep -q 'A: examples/gpt_plant.c:[0-9]' "$work/report" || fail "no call site"
    ;;
gelu)
    record "$work/a.jsonl" "$planted"
    GPT_PLANT=gelu_erf:1 record "$work/b.jsonl" "$planted"
    expect 1 "$work/a.jsonl" "$work/b.jsonl"
    site="examples/gpt_model.c:$(grep -n 'tn_gelu(' "$src/examples/gpt_model.c" | cut -d: -f1)"
    grep -q 'first culprit: op "GeluKernelImpl"' "$work/report" || fail "GELU is not the culprit"
    grep -q "A: $site" "$work/report" || fail "the culprit's call site is not $site"
    "$diverge" --json "$work/a.jsonl" "$work/b.jsonl" > "$work/json"
    grep -q '"culprits":\[{"kind":"op","name":"GeluKernelImpl","thread":0,"seq_a":30,' "$work/json" ||
        fail "--json does not name block 1's GELU (record 30)"
    ;;
autocast)
    record "$work/f32.jsonl" "$gpt"
    record "$work/bf16.jsonl" "$gpt" --autocast bf16
    expect 1 "$work/f32.jsonl" "$work/bf16.jsonl"
    grep -q 'precision lost, by op' "$work/report" || fail "no ranking"
    ;;
cuda)
    "$gpt" "${model[@]}" --device cuda --numerics "$work/cuda.jsonl" > "$work/log" 2>&1
    rc=$?
    [ $rc = 3 ] && { echo "no CUDA device"; exit 77; }
    [ $rc = 0 ] || { cat "$work/log"; fail "tenet-gpt --device cuda"; }
    "$gpt" "${model[@]}" --numerics "$work/cpu.jsonl" > "$work/log" 2>&1 || { cat "$work/log"; fail "tenet-gpt"; }
    expect 0 --rtol 2e-5 "$work/cpu.jsonl" "$work/cuda.jsonl"
    ;;
torch)
    /usr/bin/python3 -c 'import torch' 2> /dev/null || { echo "torch not installed"; exit 77; }
    "$gpt" "${model[@]}" --numerics "$work/tenet.jsonl" > "$work/log" 2>&1 || { cat "$work/log"; fail "tenet-gpt"; }
    /usr/bin/python3 "$src/scripts/torch_numerics.py" --gpt "$data" --steps 2 -o "$work/torch.jsonl" ||
        fail "torch_numerics.py"
    # 4 ulps everywhere but Adam's first steps, whose update g / (sqrt(g^2) + eps) amplifies
    # the gradients' rounding (~1e-7) up to 60x where |g| is near eps: 2e-5 covers it
    expect 1 "$work/tenet.jsonl" "$work/torch.jsonl"
    grep -q 'first culprit: optimiser update "Adam.step"' "$work/report" || fail "not Adam"
    expect 0 --rtol 2e-5 "$work/tenet.jsonl" "$work/torch.jsonl"
    # the planted erf GELU of block 1 against PyTorch: named, with both call sites
    GPT_PLANT=gelu_erf:1 "$planted" "${model[@]}" --numerics "$work/planted.jsonl" > "$work/log" 2>&1 ||
        { cat "$work/log"; fail "tenet-gpt-planted"; }
    expect 1 --rtol 2e-5 "$work/planted.jsonl" "$work/torch.jsonl"
    grep -q 'first culprit: op "GeluKernelImpl" (thread 0, record 20)' "$work/report" ||
        fail "block 1's GELU is not the culprit"
    grep -q 'A: examples/gpt_model.c:[0-9]' "$work/report" || fail "no tenet call site"
    grep -q 'B: .*scripts/gpt_reference.py:[0-9]' "$work/report" || fail "no PyTorch call site"
    ;;
*) fail "unknown case $case_" ;;
esac
echo "ok: $case_"
