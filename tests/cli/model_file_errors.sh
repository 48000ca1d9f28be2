# --model FILE.json refuses a bad description with status 1 and one error
# line naming the block, the layer and the shapes: a table of bad files
# and the message each must give (never a crash).
. "$(dirname "$0")/../lib/lib.sh"

# desc BLOCKS: a description of 3x32x32 images and 10 classes
desc() {
    printf '{"format": "cdp-model", "version": 1, "input": [3, 32, 32], "classes": 10,\n'
    printf ' "blocks": %s}\n' "$1"
}
HEAD='{"kind": "conv2d", "name": "c1", "out_channels": 8, "kernel_size": 3, "padding": 1}'
TAIL='{"kind": "avgpool"}, {"kind": "flatten"}, {"kind": "linear", "name": "fc", "out_features": 10}'

# each case: a name, the file's text, the message (a fixed string)
cases=(
    "malformed JSON"
    '{"format": "cdp-model", "version": 1,'
    'not JSON: '
    "not an object"
    '[1, 2]'
    'expected an object (a model description'
    "another format"
    '{"format": "onnx", "version": 1}'
    '"format": expected "cdp-model"'
    "a later version"
    '{"format": "cdp-model", "version": 2}'
    '"version": 2, this cdp reads version 1'
    "unknown top-level field"
    "$(desc "[[$HEAD, $TAIL]]" | sed 's/"classes"/"clases": 1, "classes"/')"
    'unknown field "clases" (a description takes: format version name input classes stages blocks)'
    "no blocks"
    "$(desc '[]')"
    '"blocks": expected an array of blocks'
    "an empty block"
    "$(desc "[[$HEAD], [], [$TAIL]]")"
    'block 1: expected a non-empty array of layers'
    "unknown layer kind"
    "$(desc "[[$HEAD, {\"kind\": \"conv3d\", \"name\": \"c2\"}, $TAIL]]")"
    'block 0, layer 1 (conv3d c2, reading 8x32x32): unknown kind "conv3d" (the kinds: linear conv2d'
    "adaptive pooling to nothing"
    "$(desc "[[$HEAD, {\"kind\": \"avgpool\", \"output_size\": 0}, {\"kind\": \"flatten\"}, {\"kind\": \"linear\", \"name\": \"fc\", \"out_features\": 10}]]")"
    'block 0, layer 1 (avgpool, reading 8x32x32): "output_size": expected an integer in [1, 65536], got 0'
    "unknown field of a kind"
    "$(desc "[[$HEAD, {\"kind\": \"relu\", \"p\": 0.5}, $TAIL]]")"
    'block 0, layer 1 (relu, reading 8x32x32): unknown field "p" (relu takes: kind name id in)'
    "an empty field name (found by fuzz/: it hung the reader)"
    "$(desc "[[$HEAD, {\"kind\": \"relu\", \"\": 1}, $TAIL]]")"
    'block 0, layer 1 (relu, reading 8x32x32): unknown field "" (relu takes: kind name id in)'
    "a field name with a newline (found by fuzz/: two lines of error)"
    "$(desc "[[$HEAD, {\"kind\": \"relu\", \"a\\nb\": 1}, $TAIL]]")"
    'block 0, layer 1 (relu, reading 8x32x32): unknown field "a?b" (relu takes: kind name id in)'
    "no name"
    "$(desc "[[{\"kind\": \"conv2d\", \"out_channels\": 8, \"kernel_size\": 3}, $TAIL]]")"
    'block 0, layer 0 (conv2d, reading 3x32x32): no "name": a conv2d'"'"'s tensors are named after its module path'
    "a bad hyper-parameter"
    "$(desc "[[{\"kind\": \"conv2d\", \"name\": \"c1\", \"out_channels\": -8, \"kernel_size\": 3}, $TAIL]]")"
    'block 0, layer 0 (conv2d c1, reading 3x32x32): "out_channels": expected an integer in [1, 65536], got -8'
    "a shape that does not fit"
    "$(desc "[[$HEAD, {\"kind\": \"conv2d\", \"name\": \"c2\", \"out_channels\": 8, \"kernel_size\": 40}, $TAIL]]")"
    'block 0, layer 1 (conv2d c2, reading 8x32x32): c2: a 32x32 input is smaller than its 40x40 kernel'
    "a linear of tokens on an image"
    "$(desc "[[$HEAD, {\"kind\": \"layernorm\", \"name\": \"ln\"}, $TAIL]]")"
    'block 0, layer 1 (layernorm ln, reading 8x32x32): ln reads a 8x32x32 tensor: it takes tokens T x 1 x D'
    "a residual join of unequal shapes"
    "$(desc "[[$HEAD, {\"kind\": \"relu\"}], [{\"kind\": \"conv2d\", \"name\": \"l1.conv\", \"out_channels\": 16, \"kernel_size\": 3, \"stride\": 2, \"padding\": 1}, {\"kind\": \"add\", \"in2\": \"c1\"}, $TAIL]]")"
    'block 1, layer 1 (add, reading 16x16x16 and 8x32x32): add of tensors 3 and 1: their shapes 16x16x16 and 8x32x32 differ'
    "a tensor not yet made (a cycle)"
    "$(desc "[[$HEAD, {\"kind\": \"add\", \"in2\": \"c2\"}, {\"kind\": \"conv2d\", \"name\": \"c2\", \"out_channels\": 8, \"kernel_size\": 3, \"padding\": 1}, $TAIL]]")"
    'block 0, layer 1 (add, reading 8x32x32): "in2": "c2" is made by a later layer (block 0, layer 2): a layer reads only tensors made before it'
    "a layer reading itself"
    "$(desc "[[$HEAD, {\"kind\": \"relu\", \"id\": \"r\", \"in\": \"r\"}, $TAIL]]")"
    'block 0, layer 1 (relu): "in": "r" is made by this layer itself (block 0, layer 1)'
    "a tensor no layer makes"
    "$(desc "[[$HEAD, {\"kind\": \"relu\", \"in\": \"c9\"}, $TAIL]]")"
    'block 0, layer 1 (relu): "in": no layer has the id or name "c9"'
    "a relu first in a block on the block's input"
    "$(desc "[[$HEAD], [{\"kind\": \"relu\"}, $TAIL]]")"
    'relu (block 1) overwrites the block'"'"'s input, tensor 1 (8x32x32): a stage boundary may fall before the block'
    "a relu6 on a tensor another layer reads"
    "$(desc "[[$HEAD, {\"kind\": \"relu6\"}, {\"kind\": \"add\", \"in2\": \"c1\"}, $TAIL]]")"
    'relu6 overwrites tensor 1, which another layer reads too'
    "a block reading an earlier block"
    "$(desc "[[$HEAD], [{\"kind\": \"batchnorm2d\", \"name\": \"bn\"}], [{\"kind\": \"add\", \"in2\": \"c1\"}, $TAIL]]")"
    'add (block 2) reads tensor 1 of an earlier block'
    "classes that are not the logits"
    "$(desc "[[$HEAD, {\"kind\": \"avgpool\"}, {\"kind\": \"flatten\"}, {\"kind\": \"linear\", \"name\": \"fc\", \"out_features\": 12}]]")"
    'block 0, layer 3 (linear fc, reading 8x1x1): the last layer makes 12 values, the logits of "classes": 10'
    "another input than the data's"
    "$(desc "[[$HEAD, $TAIL]]" | sed 's/\[3, 32, 32\]/[1, 28, 28]/')"
    '"input": the model takes 1x28x28 samples, the data'"'"'s are 3x32x32'
    "an id given twice"
    "$(desc "[[$HEAD, {\"kind\": \"relu\", \"id\": \"a\"}, {\"kind\": \"batchnorm2d\", \"name\": \"bn\", \"id\": \"a\"}, $TAIL]]")"
    'block 0, layer 2 (batchnorm2d bn, reading 8x32x32): "id": "a" is the id of an earlier layer (block 0, layer 1)'
    "a bad dropout probability"
    "$(desc "[[$HEAD, {\"kind\": \"dropout\", \"name\": \"d\", \"p\": 1.5}, $TAIL]]")"
    'block 0, layer 1 (dropout d, reading 8x32x32): "p": expected a number in [0, 1], got 1.5'
)

for ((i = 0; i < ${#cases[@]}; i += 3)); do
    what=${cases[i]}
    printf '%s\n' "${cases[i + 1]}" > "$TMP/bad.json"
    out=$(timeout 60 "$CDP" --model "$TMP/bad.json" --data synthetic:3x32x32 --print-model 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
        printf '%s' "$out" | grep -qF "cdp_run: error: --model $TMP/bad.json: ${cases[i + 2]}"; then
        pass "$what: status 1, one line"
    else
        fail "$what: status $rc: $out (expected: ${cases[i + 2]})"
    fi
done

out=$(timeout 60 "$CDP" --model "$TMP/none.json" --print-model 2>&1)
[ $? -eq 1 ] && printf '%s' "$out" | grep -qF -- "--model $TMP/none.json: cannot open it: No such file" &&
    pass "a missing file: status 1, one line" || fail "a missing file: $out"
finish
