"""``hefsearch compile hef``: bundle + calibration -> HEF with the Hailo Dataflow Compiler (entry: build.build_hef)."""
