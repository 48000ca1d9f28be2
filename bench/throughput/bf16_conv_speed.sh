#!/bin/bash
# bench/throughput/bf16_speed.sh on a convolution network: MODEL
# [resnet18-cifar], SHAPE [3x32x32]; every other knob as there.
#
#     bench/run bf16-conv-speed [BUILD_DIR]
here=$(cd "$(dirname "$0")" && pwd)
MODEL=${MODEL:-resnet18-cifar} SHAPE=${SHAPE:-3x32x32} NAME=${NAME:-bf16-conv-speed} \
    exec "$here/bf16_speed.sh" "$@"
