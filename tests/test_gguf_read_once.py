"""The GGUF conversion reads the file's metadata once and builds gguf's tensor-name map once per architecture
(transformers' loader parsed SmolLM2's file three times and built the map 397 times: half the conversion's CPU)."""
import gguf
import numpy as np

from splitlab.phases.gguf_model import _read_once


def _tiny_gguf(path):
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_token_list([f"t{i}" for i in range(50)])
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_one_reader_per_file_and_one_name_map_per_architecture_while_converting(tmp_path):
    a, b = _tiny_gguf(tmp_path / "a.gguf"), _tiny_gguf(tmp_path / "b.gguf")
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _read_once():
        first = gguf.GGUFReader(a)
        assert gguf.GGUFReader(str(a)) is first and gguf.GGUFReader(b) is not first  # by path, str or Path
        assert len(first.fields["tokenizer.ggml.tokens"].data) == 50
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
        assert gguf.get_tensor_name_map(arch, 2).get_name("token_embd") == name_map(arch, 2).get_name("token_embd")
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map  # restored
    assert gguf.GGUFReader(a) is not gguf.GGUFReader(a)


def test_restored_when_the_conversion_fails(tmp_path):
    reader = gguf.GGUFReader
    try:
        with _read_once():
            raise OSError("disk full")
    except OSError:
        pass
    assert gguf.GGUFReader is reader
