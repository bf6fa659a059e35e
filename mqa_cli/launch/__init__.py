"""The launch layer: output buffers, each kernel family's arguments and launch, the paged schedule metadata,
the compiled launcher called directly, and the interpreter switch for CPUs."""
