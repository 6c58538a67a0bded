"""The ``hefsearch compile`` verbs, one subpackage each: export/ (model -> bundle), hef/ (bundle +
calibration -> HEF with the Hailo Dataflow Compiler), sim/ (the 8-bit NPU simulation), robust/
(a body trained to survive 8 bits). Shared by several verbs: body_choice (which body a build
starts from), calib (``compile calib``), profiles (the precision names ``--precision`` takes),
self_check (a derived body against FP32), and cpu_int8 (``compile cpu-int8``, one module)."""
