"""The ``routing.attachments`` section: how attachments are typed, bounded and matched to models.

::

    routing:
      attachments:
        max_bytes: 20971520            # largest decoded attachment; larger is a 400
        accept:                        # model -> the types it accepts; a model left out accepts all
          vision-small: [png, jpg, webp]
          doc-reader: [pdf, docx, txt]

Types are short names: the file extension ``filetype`` gives the bytes (``pdf``, ``docx``, ``png``,
``jpg``...), or ``unknown`` for an attachment whose type cannot be told (see
:attr:`router_core.decide.attachments.Attachment.type`). Names are lower-cased and aliases folded
(``jpeg`` -> ``jpg``), so ``accept`` may be written either way.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from schemas.common import ContractModel

__all__ = ["NAMED_TYPES", "TYPE_ALIASES", "UNKNOWN_TYPE", "AttachmentSettings", "normalise_type"]

UNKNOWN_TYPE = "unknown"
# Other spellings of a type -> the name filetype gives it.
TYPE_ALIASES: dict[str, str] = {"jpeg": "jpg", "jpe": "jpg", "tiff": "tif", "aif": "aiff", "mid": "midi",
                                "mpeg": "mpg", "zstd": "zst", "oga": "ogg", "htm": "html", "markdown": "md",
                                "text": "txt"}

# The types a declared name (a file name's suffix, a URL path's, a MIME subtype, an audio format) may
# give: every type ``filetype`` detects by its bytes (a test keeps them in step) and the common ones it
# cannot (text, code, data). Any other declared name reads ``unknown``: it is the client's own text.
NAMED_TYPES = frozenset("""
    3gp 7z aac aiff amr apng ar avi avif bmp br bz2 cab cr2 crx dcm deb doc docx dwg elf eot epub exe flac flv
    gif gz heic ico jpg jpx jxr lz lz4 lzo m4a m4v midi mkv mov mp3 mp4 mpg nes odp ods odt ogg otf pdf png ppt
    pptx ps psd rar rpm rtf sqlite swf tar tif ttf wasm wav webm webp wmv woff woff2 xcf xls xlsx xz z zip zst
    txt md csv tsv json jsonl xml html css yaml yml toml ini cfg conf log sql svg tex rst ipynb heif opus pcm16
    py js mjs ts jsx tsx java kt scala c h cpp hpp cc cs go rs rb php swift sh bat ps1 r m lua pl dart vue
""".split())


def normalise_type(name: str) -> str:
    """Return the short type name ``name`` stands for (lower case, aliases folded, no leading dot)."""
    short = name.strip().lstrip(".").lower()
    return TYPE_ALIASES.get(short, short)


class AttachmentSettings(ContractModel):
    """Limits on attachments and which detected types each model accepts."""

    max_bytes: int = Field(20 * 1024 * 1024, gt=0, description="Largest decoded attachment; larger is a 400.")
    accept: dict[str, list[str]] = Field(
        default={},
        description="Model -> detected types it accepts (pdf, docx, png, ...); a model left out accepts every type.")

    @field_validator("accept")
    @classmethod
    def _normalise(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        return {model: [normalise_type(t) for t in types] for model, types in value.items()}

    def accepts(self, model: str, kind: str) -> bool:
        """Whether ``model`` accepts attachments of type ``kind`` (a model not listed accepts all)."""
        types = self.accept.get(model)
        return types is None or kind in types
