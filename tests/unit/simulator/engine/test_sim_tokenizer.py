from __future__ import annotations

from latency_tuner.simulator.tokenizer import (
    MAX_PIECE,
    encode,
    encode_chat,
    output_text,
    output_token_ids,
    token_id,
)


def test_one_token_per_whitespace_separated_word() -> None:
    assert len(encode("the quick  brown\tfox\njumps")) == 5


def test_a_word_longer_than_the_piece_size_is_split_every_piece_size_characters() -> None:
    word = "x" * (2 * MAX_PIECE + 1)
    assert len(encode(word)) == 3
    assert len(encode("y" * MAX_PIECE)) == 1


def test_identical_text_prefixes_give_identical_token_id_prefixes() -> None:
    a = encode("shared system prompt here then question one")
    b = encode("shared system prompt here then another question")
    assert a[:5] == b[:5]
    assert a[5:] != b[5:]


def test_token_ids_are_stable_values_not_process_dependent() -> None:
    # blake2b, not Python's salted hash(): this value must never change between runs.
    assert (
        token_id("hello")
        == int.from_bytes(__import__("hashlib").blake2b(b"hello", digest_size=8).digest(), "little")
        % 128_000
    )


def test_chat_template_wraps_each_message_in_role_marker_tokens() -> None:
    ids = encode_chat(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    # <|im_start|> system be brief <|im_end|> <|im_start|> user hi <|im_end|> <|im_start|> assistant
    assert len(ids) == 5 + 4 + 2
    assert ids[0] == ids[5] == ids[9] == token_id("<|im_start|>")
    assert ids[-1] == token_id("assistant")


def test_chat_content_parts_contribute_their_text() -> None:
    parts = [{"type": "text", "text": "one two"}, {"type": "image_url", "image_url": {}}]
    assert encode_chat([{"role": "user", "content": parts}]) == encode_chat(
        [{"role": "user", "content": "one two"}]
    )


def test_output_text_has_one_pseudo_word_per_token_and_reencodes_to_its_ids() -> None:
    prompt = encode("a b c")
    text = output_text(prompt, 0, 7)
    assert len(text.split()) == 7
    assert encode(text) == output_token_ids(prompt, 0, 7)
    assert output_text(prompt, 3, 2) == " " + " ".join(text.split()[3:5])
