#!/usr/bin/env bash
# The normalised decoders end to end (Qwen3, OLMo-2, Gemma 2, Gemma 3 text, Qwen3-MoE): info, analyze
# from text (tiny checkpoints of fixtures/ref/make_norms_fixtures.py sized to a family
# tokenizer.json), the report's loss, ablation and each layer's local/global attention against
# the float64 reference fixtures/ref/families_norms.py on the report's ids, and the configs
# refused by name in one line. Run by `make test` beside cli.sh.
set -u
HS=${HEADSCOPE:-build/headscope}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/hs-cli-norms-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/cli_util.sh"

TEXT="The cat sat on the mat. The cat sat on the mat. The dog ran after the cat."
for spec in qwen3:qwen2 olmo2:qwen2 gemma2:gemma gemma3:gemma qwen3-moe:qwen2; do
    fam=${spec%:*} tok=${spec#*:}
    "$PY" fixtures/ref/make_norms_fixtures.py --one "tiny-$fam" --out "$T/$fam" \
        --tokenizer "fixtures/tokenizer/families/$tok.tokenizer.json" || bad "tiny $fam checkpoint"
    expect 0 "info $fam" -- "$HS" info "$T/$fam"
    expect 0 "analyze $fam" -- "$HS" analyze "$T/$fam" -o "$T/out-$fam" -q --text "$TEXT"
    if "$PY" -c "
import json, sys
import numpy as np
sys.path.insert(0, 'fixtures/ref')
import families_norms as F
r = json.load(open('$T/out-$fam/report.json'))
m = F.load_model('$T/$fam')
c = m.cfg
want = [{'attention': 'local', 'window': c['sliding_window']} if F.layer_is_local(c, l)
        else {'attention': 'global', 'window': None} for l in range(c['L'])]
assert r['model']['layers'] == want, r['model']['layers']
assert r['model']['family'] == c['kind'] and r['model']['d_head'] == c['dh']
assert not r['composition']['available']
dla = r['direct_logit_attribution']
assert dla['available'], dla   # heads wider than d_model / n_head, norms and softcaps linearised
assert all('norm_based' in h for h in r['heads']), r['heads'][0]
ids = r['input']['ids']
assert (ids[0] == 2) == c['gemma'], ids[:3]   # Gemma's tokenizer puts <bos> first
base, abl = F.ablation(m, np.array(ids))
got = np.array([h['ablation_delta'] for h in r['heads']]).reshape(abl.shape)
d = max(abs(base - r['loss']['value']), float(np.abs(got - abl).max()))
print('$fam report: loss and ablation max|d| = %.3g' % d)
sys.exit(0 if d <= 1e-5 else 1)" >"$T/cmp" 2>&1; then
        ok
    else
        bad "$fam report vs families_norms.py: $(cat "$T/cmp")"
    fi
done
expect 0 "info gemma2" -- "$HS" info "$T/gemma2"
if grep -q '^global:       layer 1 (the others local)$' "$T/out" &&
    grep -q '^softcap:      attention 5, final logits 3 (0: none)$' "$T/out"; then ok; else bad "info gemma2: $(cat "$T/out")"; fi
expect 0 "analyze gemma3 summary" -- "$HS" analyze "$T/gemma3" -o "$T/out-g3s" --no-ablation --text "$TEXT"
if grep -q '^layers: local (window 48): 0, 1; global: 2$' "$T/out"; then ok; else bad "gemma3 summary: $(cat "$T/out")"; fi

# GGUF: each family converted as llama.cpp lays it out (Gemma's norm weights stored as 1 + w,
# its window, softcaps and scales as keys), converted again bit for bit, and the report of the
# GGUF file the same as the folder's: exactly for F32 weights (Qwen3, Gemma 3; OLMo-2's BF16
# are exact in F32), within 1e-3 for Gemma 2, whose BF16 checkpoint scales the embeddings by
# sqrt(96) rounded to BF16 (transformers) where a GGUF file keeps it in float32 (llama.cpp).
for fam in qwen3 olmo2 gemma2 gemma3 qwen3-moe; do
    expect 0 "convert $fam" -- "$HS" convert "$T/$fam" -o "$T/$fam.gguf" --name t
    expect 0 "convert $fam again" -- "$HS" convert "$T/$fam.gguf" -o "$T/$fam.2.gguf" --name t
    if cmp -s "$T/$fam.gguf" "$T/$fam.2.gguf"; then ok; else bad "$fam: GGUF -> GGUF differs"; fi
    expect 0 "analyze $fam GGUF" -- "$HS" analyze "$T/$fam.gguf" -o "$T/outg-$fam" -q --text "$TEXT"
    if "$PY" -c "
import json, sys
a = json.load(open('$T/out-$fam/report.json'))
b = json.load(open('$T/outg-$fam/report.json'))
tol = 1e-3 if '$fam' == 'gemma2' else 0.0
da = [h['ablation_delta'] for h in a['heads']]
db = [h['ablation_delta'] for h in b['heads']]
d = max([abs(a['loss']['value'] - b['loss']['value'])] + [abs(x - y) for x, y in zip(da, db)])
same = a['input']['ids'] == b['input']['ids'] and a['model']['layers'] == b['model']['layers']
print('$fam GGUF vs folder: max|d| = %.3g' % d)
sys.exit(0 if same and d <= tol else 1)" >"$T/cmp" 2>&1; then ok; else bad "$fam GGUF report: $(cat "$T/cmp")"; fi
done
# A qwen3moe file with a key renamed, a count out of range or an expert tensor renamed (bytes
# patched in place): one line naming it
gguf_patch() { # gguf_patch DESC FROM TO MESSAGE
    "$PY" -c "
import sys
b = open('$T/qwen3-moe.gguf', 'rb').read()
f, t = (a.encode('latin-1').decode('unicode_escape').encode('latin-1') for a in sys.argv[1:3])
assert b.count(f) == 1 and len(f) == len(t), sys.argv[1]
open('$T/moe-bad.gguf', 'wb').write(b.replace(f, t))" "$2" "$3" || bad "$1: patch"
    expect 1 "$1" -- "$HS" info "$T/moe-bad.gguf"
    one_line_error "$1"
    stderr_has "$1" "$4"
}
gguf_patch "qwen3moe without expert_used_count" "qwen3moe.expert_used_count" "qwen3moe.expert_used_counx" "qwen3moe.expert_used_count"
gguf_patch "qwen3moe with 9 of 4 experts a token" 'expert_used_count\x04\x00\x00\x00\x02' 'expert_used_count\x04\x00\x00\x00\x09' "expert_used_count 9 must be in [1, expert_count 4]"
gguf_patch "qwen3moe missing an expert tensor" "blk.1.ffn_up_exps.weight" "blk.1.ffn_up_exps.weighx" "missing tensor 'blk.1.ffn_up_exps.weight'"
# Its experts made Q8_0, as llama-quantize leaves them (fixtures/gguf/requant_experts.py): read
# through the same stacked-expert reader as deepseek2's, the loss within 0.05 of the F32 file's
"$PY" fixtures/gguf/requant_experts.py "$T/qwen3-moe.gguf" "$T/moe-q8.gguf" || bad "qwen3moe Q8_0 experts: requantise"
expect 0 "analyze qwen3moe Q8_0 experts" -- "$HS" analyze "$T/moe-q8.gguf" -o "$T/outq-moe" -q --text "$TEXT"
if "$PY" -c "
import json, sys
a = json.load(open('$T/outg-qwen3-moe/report.json'))
b = json.load(open('$T/outq-moe/report.json'))
d = abs(a['loss']['value'] - b['loss']['value'])
print('qwen3moe Q8_0 experts vs F32: loss |d| = %.3g' % d)
sys.exit(0 if a['input']['ids'] == b['input']['ids'] and 0 < d <= 0.05 else 1)" >"$T/cmp" 2>&1; then ok; else bad "qwen3moe Q8_0 experts: $(cat "$T/cmp")"; fi

expect 0 "info gemma2 GGUF" -- "$HS" info "$T/gemma2.gguf"
if grep -q '^softcap:      attention 5, final logits 3 (0: none)$' "$T/out" &&
    grep -q '^attention:    a sliding window of 64 keys on the local layers$' "$T/out" &&
    grep -q '^scales:       scores x 0.144338, embeddings x 9.79796$' "$T/out"; then ok; else bad "info gemma2 GGUF: $(cat "$T/out")"; fi

# A gemma3 (image-text) folder: the same language model under text_config, its tensors named
# as Gemma3ForConditionalGeneration saves them (language_model.model.*, and from transformers
# 4.52 model.language_model.*), a vision tower beside them that is not read: the same report.
for style in language_model.model. model.language_model.; do
    rm -rf "$T/mm" && mkdir "$T/mm" && cp "$T/gemma3/tokenizer.json" "$T/mm/"
    "$PY" -c "
import json, sys
sys.path.insert(0, 'fixtures/ref')
import hs_ref
src = hs_ref.read_safetensors('$T/gemma3/model.safetensors')
items = [('$style' + k[len('model.'):], 'F32', list(v.shape), v) for k, v in src.items()]
items.append(('vision_tower.vision_model.post_layernorm.weight', 'F32', [4], [1.0, 1.0, 1.0, 1.0]))
hs_ref.write_safetensors('$T/mm/model.safetensors', items, {'format': 'pt'})
text = json.load(open('$T/gemma3/config.json'))
json.dump({'architectures': ['Gemma3ForConditionalGeneration'], 'model_type': 'gemma3',
           'text_config': text, 'vision_config': {'model_type': 'siglip_vision_model'}},
          open('$T/mm/config.json', 'w'))" || bad "gemma3 image-text folder ($style)"
    expect 0 "analyze gemma3 image-text ($style)" -- "$HS" analyze "$T/mm" -o "$T/out-mm" -q --text "$TEXT"
    if "$PY" -c "
import json, sys
a = json.load(open('$T/out-gemma3/report.json'))
b = json.load(open('$T/out-mm/report.json'))
ha, hb = [h['ablation_delta'] for h in a['heads']], [h['ablation_delta'] for h in b['heads']]
sys.exit(0 if a['loss'] == b['loss'] and ha == hb and b['model']['family'] == 'gemma3_text' else 1)"; then
        ok
    else
        bad "gemma3 image-text ($style) report differs from the text model's"
    fi
done

# Qwen3-MoE: the router's choices in dump against the reference's (layer 1 of the BF16 model
# is dense: no file), the experts' layers in info, and what llama.cpp's qwen3moe cannot hold
# refused by convert in one line
"$PY" fixtures/ref/make_norms_fixtures.py --one tiny-qwen3-moe-bf16 --out "$T/qwen3-moe-bf16" \
    --tokenizer fixtures/tokenizer/families/qwen2.tokenizer.json || bad "tiny qwen3-moe-bf16 checkpoint"
expect 0 "dump qwen3_moe router" -- "$HS" dump "$T/qwen3-moe-bf16" --text "$TEXT" --what router -o "$T/moed" -q
"$PY" - "$T/moed" "$T/qwen3-moe-bf16" <<'PYEOF' && ok || bad "qwen3_moe dump router vs families_norms.py"
import json, os, sys
import numpy as np
sys.path.insert(0, "fixtures/ref")
import families_norms as F
d, m = sys.argv[1], F.load_model(sys.argv[2])
routes = {}
F.forward(m, np.load(os.path.join(d, "input_ids.npy")), want_logits=False, routes=routes)
names = [f["file"] for f in json.load(open(os.path.join(d, "manifest.json")))["files"]]
assert sorted(routes) == [0, 2] and "blocks.1.mlp.router_experts.npy" not in names, names
for l, want in routes.items():
    got = np.load(os.path.join(d, "blocks.%d.mlp.router_experts.npy" % l))
    assert got.dtype == np.int32 and (got == want).all(), (l, got, want)
PYEOF
expect 0 "info qwen3_moe" -- "$HS" info "$T/qwen3-moe-bf16"
grep -q '^experts:      4 routed (2 a token, softmax), 32 wide, in layers 0, 2$' "$T/out" && ok || bad "info qwen3_moe: $(cat "$T/out")"
expect 1 "convert qwen3_moe with a dense layer" -- "$HS" convert "$T/qwen3-moe-bf16" -o "$T/dense.gguf"
one_line_error "convert qwen3_moe with a dense layer"
stderr_has "convert qwen3_moe with a dense layer" "has dense layers (mlp_only_layers or decoder_sparse_step), and llama.cpp's qwen3moe"
[ ! -e "$T/dense.gguf" ] && ok || bad "convert qwen3_moe with a dense layer left a file"

# Configs the block cannot compute exactly: one line naming the key, exit 1.
refuse() { # refuse FAMILY DESCRIPTION PYTHON-EDIT MESSAGE
    rm -rf "$T/bad" && cp -r "$T/$1" "$T/bad"
    "$PY" -c "
import json
p = '$T/bad/config.json'
c = json.load(open(p))
$3
json.dump(c, open(p, 'w'))"
    expect 1 "$2" -- "$HS" info "$T/bad"
    one_line_error "$2"
    stderr_has "$2" "$4"
}
refuse gemma2 "gemma2 dynamic rope" "c['rope_scaling'] = {'rope_type': 'dynamic', 'factor': 4.0}" "rope scaling type 'dynamic' is not supported"
refuse gemma2 "gemma2 relu" "c['hidden_activation'] = 'relu'" "hidden_activation 'relu' is not supported"
refuse gemma2 "gemma2 negative softcap" "c['attn_logit_softcapping'] = -1" "'attn_logit_softcapping' must be a number"
refuse gemma2 "gemma2 attention bias" "c['attention_bias'] = True" "'attention_bias': true is not supported"
refuse gemma3 "gemma3 irregular layer_types" "c['layer_types'] = ['sliding_attention', 'full_attention', 'full_attention']" "layer_types: layer 2 is full_attention, out of the repeating pattern"
refuse gemma3 "gemma3 bidirectional" "c['use_bidirectional_attention'] = True" "'use_bidirectional_attention': true is not supported"
refuse qwen3 "qwen3 sliding window" "c['use_sliding_window'] = True" "'use_sliding_window': true is not supported"
refuse olmo2 "olmo2 attention bias" "c['attention_bias'] = True" "'attention_bias': true is not supported"
refuse qwen3-moe "qwen3_moe sliding window" "c['use_sliding_window'] = True" "'use_sliding_window': true is not supported"
refuse qwen3-moe "qwen3_moe mlp_only_layers" "c['mlp_only_layers'] = [2]" "mlp_only_layers holds something that is not a layer index below 2"
refuse qwen3-moe "qwen3_moe top k" "c['num_experts_per_tok'] = 5" "num_experts_per_tok must be in [1, num_experts 4]"
# layer_types agreeing with the pattern is accepted
refuse_ok() { rm -rf "$T/bad" && cp -r "$T/gemma3" "$T/bad"; }
refuse_ok
"$PY" -c "
import json
p = '$T/bad/config.json'
c = json.load(open(p))
c['layer_types'] = ['sliding_attention', 'sliding_attention', 'full_attention']
del c['sliding_window_pattern']
json.dump(c, open(p, 'w'))"
expect 0 "gemma3 layer_types" -- "$HS" info "$T/bad"
if grep -q '^global:       layer 2 (the others local)$' "$T/out"; then ok; else bad "gemma3 layer_types: $(cat "$T/out")"; fi

# transformers 5's rope_parameters per layer type (Gemma 3): the same model
refuse_ok
"$PY" -c "
import json
p = '$T/bad/config.json'
c = json.load(open(p))
c['rope_parameters'] = {'full_attention': {'rope_type': 'linear', 'factor': 4.0, 'rope_theta': 1000000.0},
                        'sliding_attention': {'rope_type': 'default', 'rope_theta': 10000.0}}
for k in ('rope_scaling', 'rope_theta', 'rope_local_base_freq'):
    del c[k]
json.dump(c, open(p, 'w'))"
expect 0 "analyze gemma3 rope_parameters" -- "$HS" analyze "$T/bad" -o "$T/out-rp" -q --text "$TEXT"
if "$PY" -c "
import json, sys
a = json.load(open('$T/out-gemma3/report.json'))
b = json.load(open('$T/out-rp/report.json'))
sys.exit(0 if a['loss'] == b['loss'] else 1)"; then ok; else bad "gemma3 rope_parameters per layer type: another loss"; fi
refuse gemma3 "gemma3 scaled local rope" "c['rope_parameters'] = {'full_attention': {'rope_theta': 1e6}, 'sliding_attention': {'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 1e4}}" "rope_parameters.sliding_attention.rope_type 'linear' is not supported"

echo "cli_norms: $pass passed, $fail failed"
[ "$fail" = 0 ]
