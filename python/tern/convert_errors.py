"""The converters' refusal (tern.convert, tern.hf_weights, tern.opus_release)."""


class ConversionError(ValueError):
    """A model the converter refuses, with one line naming the file and the field."""
