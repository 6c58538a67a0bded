"""Fake of ``hailo_sdk_client.exposed_definitions``: the names public scripts import from it."""

from enum import Enum


class InferenceContext(Enum):
    SDK_NATIVE = "sdk_native"  # float, the parsed graph
    SDK_FP_OPTIMIZED = "sdk_fp_optimized"  # float, with model-script changes
    SDK_QUANTIZED = "sdk_quantized"  # emulated quantised network (needs optimize())
    SDK_BIT_EXACT = "sdk_bit_exact"
    SDK_HAILO_HW = "sdk_hailo_hw"


class Dims(Enum):
    BATCH = "batch"
    HEIGHT = "height"
    WIDTH = "width"
    CHANNELS = "channels"
    GROUPS = "groups"
