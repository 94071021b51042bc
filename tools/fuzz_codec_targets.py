"""Fuzz targets of the scanner's wire: frame decoding and the stream decoder, the BeeTek serial
stream, a reader session (sequence, heartbeats, MACs) and the scanner's JSON over MQTT."""

from __future__ import annotations

import random
from typing import Any

from tools.fuzz_inputs import (
    KEY,
    MAX_INPUT,
    OTHER_KEY,
    Violation,
    dump_json,
    encode_text,
    mutate_bytes,
    mutate_tree,
    unicode_text,
)
from tools.fuzz_target import JsonTarget, Target, need


class FrameDecodeTarget(Target):
    name = "frame_decode"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers import frames

        self.f = frames
        self.allowed = (frames.FrameError,)

    def generate(self, rng: random.Random) -> bytes:
        r = rng.random()
        if r < 0.15:
            line = rng.choice(self.corpus.frame_lines)
            return line if rng.random() < 0.7 else line[:-2] + rng.choice((b"\n", b"", b"\r", b"\n\r"))
        if r < 0.60:
            return self.structured(rng)
        line = mutate_bytes(rng.choice(self.corpus.frame_lines), rng, self.corpus.frame_lines)
        return self.fix_crc(line) if rng.random() < 0.5 else line

    def structured(self, rng: random.Random) -> bytes:
        """Fields broken one at a time, behind a correct CRC (85%) so the field checks see them."""
        statuses = [s.value for s in self.f.Status]
        status = rng.choice(statuses) if rng.random() < 0.85 else rng.choice(("ok", "", "OKAY", "HB ", "NO READ",
                                                                                unicode_text(rng, 2)))
        reader = (rng.choice(("SC1", "GW-07", "0123456789ABCDEF")) if rng.random() < 0.6 else
                  rng.choice(("", "sc1", "A" * 17, "SC 1", "SC_1", "-", "SC1\x00", unicode_text(rng, 3),
                              "".join(rng.choice("ABCZ019-") for _ in range(rng.randrange(1, 20))))))
        seq = (str(rng.randrange(2**32)) if rng.random() < 0.6 else
               rng.choice(("0", "00", "01", "-1", "4294967295", "4294967296", "99999999999", "", "1e3", " 1", "+1",
                           "0x1", "\u0661", "9" * 40)))
        if status == "BOOT" and rng.random() < 0.8:
            seq = "0"
        good = {"OK": ["AS", "TD", "01G", "11JD", "10"], "NOREAD": [""], "MISREAD": ["", "?", "AB?C"],
                "FAULT": sorted(self.f.FAULT_CODES), "HB": [""], "BOOT": ["", "1.2.3", "a-b.c"]}
        payload = (rng.choice(good.get(status, [""])) if rng.random() < 0.6 else
                   rng.choice(("", "as", "A", "ASDFG", "?" * 9, "JAMMED", "x" * 17, "A,B", "A*B", "A$B",
                               unicode_text(rng, 2))))
        fields = [reader, seq, status, payload]
        if rng.random() < 0.1:
            if rng.random() < 0.5:
                fields.insert(rng.randrange(5), rng.choice(("", "X", "MAC=00")))
            else:
                del fields[rng.randrange(4)]
        body = encode_text(",".join(fields))
        if rng.random() < 0.25 and hasattr(self.f, "compute_mac"):  # a signature trailer ';boot;mac'
            boot = rng.choice(("0", "1", "7", "4294967295", "4294967296", "01", "", "-1", "x", "9" * 30))
            try:
                good = self.f.compute_mac(KEY, body, int(boot))
            except ValueError:
                good = "0" * 64
            mac = rng.choice((good, good, good.upper(), good[:-1], good + "0", "", "g" * 64,
                              "".join(rng.choice("0123456789abcdef") for _ in range(64))))
            parts = [boot, mac] if rng.random() < 0.9 else rng.choice(([boot], [mac], [boot, mac, "x"]))
            body += encode_text(";" + ";".join(parts))
        if rng.random() < 0.85:
            crc = f"{self.f.crc16(body):04X}".encode()
        else:
            crc = rng.choice((b"", b"0", b"ABC", b"abcd", b"12345", b"GGGG", b"00 0", f"{rng.randrange(65536):04X}".encode()))
        term = rng.choice((b"\r\n", b"\r\n", b"\r\n", b"\n", b"", b"\r", b"\n\r", b"\r\n\r\n"))
        return b"$" + body + b"*" + crc + term

    def fix_crc(self, line: bytes) -> bytes:
        start, star = line.find(b"$"), line.rfind(b"*")
        if start < 0 or star < start or len(line) < star + 5:
            return line
        return line[: star + 1] + f"{self.f.crc16(line[start + 1 : star]):04X}".encode() + line[star + 5 :]

    def check(self, inp: bytes) -> bool:
        frame = self.f.decode_frame(inp)
        body = inp[:-2] if inp.endswith(b"\r\n") else inp[:-1] if inp.endswith(b"\n") else inp
        try:
            again = self.f.encode_frame(frame)
        except Exception as exc:  # noqa: BLE001 - whatever stops the re-encoding is the finding
            raise Violation(f"a decoded frame does not re-encode: {type(exc).__name__}: {exc}") from None
        need(again == body + b"\r\n", f"a decoded frame re-encodes differently: {again!r}")
        return True

    def rejection(self, exc: BaseException) -> None:
        super().rejection(exc)
        reason, raw = getattr(exc, "reason", None), getattr(exc, "raw", None)
        need(isinstance(reason, str) and bool(reason), f"FrameError without a reason category: {reason!r}")
        need(isinstance(raw, bytes) and len(raw) <= self.f.MAX_FRAME_LEN,
              f"FrameError.raw is not at most one frame of bytes: {raw!r}")


class FrameStreamTarget(FrameDecodeTarget):
    """``FrameDecoder.feed``: never raises; the output must not depend on the chunking."""

    name = "frame_stream"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        self.allowed = ()

    def generate(self, rng: random.Random) -> tuple[bytes, tuple[int, ...]]:
        pieces = []
        for _ in range(rng.randrange(1, 12)):
            r = rng.random()
            if r < 0.35:
                pieces.append(rng.choice(self.corpus.frame_lines))
            elif r < 0.60:
                pieces.append(super().generate(rng))
            elif r < 0.70:
                pieces.append(rng.randbytes(rng.randrange(1, 40)))
            elif r < 0.80:
                line = rng.choice(self.corpus.frame_lines)
                pieces.append(line[: rng.randrange(len(line))])
            elif r < 0.87:
                pieces.append(b"$" + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randrange(50, 200))))
            elif r < 0.94:
                pieces.append(b"$" * rng.randrange(1, 5))
            else:
                pieces.append(rng.choice((b"\n", b"\r\n", b"\n\n", b"*", b"\r")))
        stream = b"".join(pieces)
        if len(stream) < 300 and rng.random() < 0.1:
            return stream, tuple(range(1, len(stream)))
        cuts = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randrange(0, 9)))
        return stream, tuple(cuts)

    def from_bytes(self, data: bytes) -> tuple[bytes, tuple[int, ...]]:
        if not data:
            return b"", ()
        rng = random.Random(data[0])
        stream = data[1:]
        return stream, tuple(sorted(rng.randrange(len(stream) + 1) for _ in range(data[0] % 8)))

    def to_bytes(self, inp: Any) -> bytes:
        return bytes([len(inp[1]) % 8]) + inp[0]

    @staticmethod
    def _norm(items: list[Any]) -> list[tuple[Any, ...]]:
        return [("frame", x) if not isinstance(x, Exception) else ("error", str(x), getattr(x, "reason", None),
                                                                    getattr(x, "raw", None)) for x in items]

    def check(self, inp: tuple[bytes, tuple[int, ...]]) -> bool:
        stream, cuts = inp
        whole = self.f.FrameDecoder()
        out = whole.feed(stream)
        chunked = self.f.FrameDecoder()
        out2: list[Any] = []
        prev = 0
        for cut in (*cuts, len(stream)):
            out2 += chunked.feed(stream[prev:cut])
            prev = cut
        need(self._norm(out) == self._norm(out2), "the decoded output depends on how the stream was chunked")
        need(whole.garbage_bytes == chunked.garbage_bytes, "garbage_bytes depends on the chunking")
        errors = 0
        for item in out:
            if isinstance(item, self.f.FrameError):
                errors += 1
                super().rejection(item)
            elif isinstance(item, self.f.Frame):
                need(self.f.decode_frame(self.f.encode_frame(item)) == item, f"frame {item!r} does not round-trip")
            else:
                raise Violation(f"feed() returned a {type(item).__name__}")
        return errors == 0


#: A Bee-Tek stream input: 4 s of a 9600-baud line, four times what one read of the link returns.
_BEETEK_MAX = 4096


class BeeTekStreamTarget(Target):
    """``BeeTekCodec.feed`` (a Bee-Tek shoe's ASCII elements): never raises; the output does not
    depend on the chunking; a card read is one of the 52 codes; every CORRUPT input says why;
    the decoder holds at most one element whatever arrives (no delimiter, no end)."""

    name = "beetek_stream"
    _TAGS = ("Game", "Manual Burn Cards", "GameAlarm", "game", "", "Manual Burn", "Game ]")
    _BODIES = ("Card:4S", "Card:10H", "Card:TD", "Card:AC", "Game", "Alarm:E3 Card Not Read", "Alarm:", "W0x01",
               "W0xFFFF", "W0x", "Card:1S", "Card:4s", "Card:", "Card:10", "Card:KX", "Hello", "")

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers.codecs import Notice, beetek
        from drivers.scan import ScanInput

        self.b, self.notice, self.scan_input = beetek, Notice, ScanInput
        self.seeds = [f" [{t}]<{body}> ".encode() for t in self._TAGS[:3] for body in self._BODIES[:7]] + [b"<W0x01>"]

    def generate(self, rng: random.Random) -> tuple[bytes, tuple[int, ...]]:
        pieces = []
        for _ in range(rng.randrange(1, 14)):
            r = rng.random()
            if r < 0.40:
                pieces.append(rng.choice(self.seeds))
            elif r < 0.60:
                tag = rng.choice(self._TAGS) if rng.random() < 0.8 else unicode_text(rng, 3)
                body = rng.choice(self._BODIES) if rng.random() < 0.8 else unicode_text(rng, 4)
                pieces.append(encode_text((f"[{tag}]" if rng.random() < 0.85 else "") + f"<{body}>"))
            elif r < 0.75:
                pieces.append(mutate_bytes(rng.choice(self.seeds), rng, self.seeds))
            elif r < 0.85:
                pieces.append(rng.randbytes(rng.randrange(1, 60)))
            elif r < 0.92:
                pieces.append(rng.choice((b"[", b"<")) + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randrange(20, 200))))
            else:
                pieces.append(rng.choice((b"[", b"]", b"<", b">", b"  ", b"\r\n", b"[[", b"<<>>")))
        stream = b"".join(pieces)[:_BEETEK_MAX]
        cuts = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randrange(0, 9)))
        return stream, tuple(cuts)

    from_bytes = FrameStreamTarget.from_bytes
    to_bytes = FrameStreamTarget.to_bytes

    @staticmethod
    def _norm(items: list[Any]) -> list[tuple[Any, ...]]:
        return [(type(i).__name__, getattr(i, "kind", None), getattr(i, "code", None), getattr(i, "burn", None),
                 getattr(i, "detail", None), getattr(i, "message", None), getattr(i, "raw", None)) for i in items]

    def check(self, inp: tuple[bytes, tuple[int, ...]]) -> bool:
        stream, cuts = inp[0][:_BEETEK_MAX], inp[1]
        whole = self.b.BeeTekCodec("SC1")
        out = whole.feed(stream, 1).items
        chunked = self.b.BeeTekCodec("SC1")
        out2: list[Any] = []
        prev = 0
        for cut in (*cuts, len(stream)):
            out2 += chunked.feed(stream[prev:cut], 1).items
            prev = cut
            need(len(chunked.decoder._buf) <= max(self.b.MAX_TAG, self.b.MAX_BODY), "the decoder's buffer grew "
                  "beyond one element", key="unbounded buffer")
        need(self._norm(out) == self._norm(out2), "the decoded output depends on how the stream was chunked")
        need(whole.garbage_bytes == chunked.garbage_bytes, "garbage_bytes depends on the chunking")
        corrupt = 0
        for item in out:
            if isinstance(item, self.notice):
                need(bool(item.kind) and bool(item.message.strip()), "a notice without a kind or message")
                need(len(item.raw) <= self.b.MAX_ELEMENT, f"a notice carries more than one element: {item.raw!r}")
            elif isinstance(item, self.scan_input):
                if item.kind.value == "OK":
                    need(item.code in self.b.CARDS, f"a card read of {item.code!r}, not one of the 52 codes")
                else:
                    need(bool(item.detail.strip()), f"a {item.kind.value} input without a detail")
                    corrupt += item.kind.value == "CORRUPT"
            else:
                raise Violation(f"feed() returned a {type(item).__name__}")
        return corrupt == 0


_SESSION_STATE = ("last_seq", "boot", "last_seen_ns", "last_heartbeat_ns", "lost", "repeats", "restarts", "late",
                  "boots", "firmware")


class ReaderSessionTarget(Target):
    """``ReaderSession.accept`` over a stream of valid frames with gaps, repeats, restarts and
    wraps; half of the sessions authenticate (HMAC), fed genuine, forged, unsigned and
    replayed frames. A FORGED input must come alone, with a reason, and change nothing else."""

    name = "reader_session"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers import frames
        from drivers.scan import ScanKind

        self.f, self.kinds = frames, ScanKind
        self.session = frames.ReaderSession("SC1")
        self.allowed = (ValueError,)  # only for a frame of another reader
        self.ns = 0
        self.signing = hasattr(frames, "FrameAuthenticator")
        self.boot = 0  # the simulated reader's boot counter

    def generate(self, rng: random.Random) -> Any:
        f = self.f
        if rng.random() < 1 / 256:
            auth = rng.choice((None, False, True)) if self.signing else None
            return ("reset", auth)
        status = rng.choices(list(f.Status), weights=(50, 6, 6, 4, 25, 3))[0]
        last = self.session.last_seq if self.session.last_seq is not None else rng.randrange(2**32)
        r = rng.random()
        seq = ((last + 1) if r < 0.6 else last if r < 0.72 else last + rng.randrange(2, 5) if r < 0.82 else
               rng.choice((0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1)) if r < 0.9 else
               last - rng.randrange(1, 5) if r < 0.95 else rng.randrange(2**32)) % f.SEQ_MOD
        payload = {"OK": rng.choice(("AS", "KD", "01G")), "FAULT": "JAM", "MISREAD": "?",
                   "BOOT": "1.0"}.get(status.value, "")
        if status is f.Status.BOOT:
            seq = 0
            if rng.random() < 0.9:
                self.boot += 1
        reader = "SC1" if rng.random() < 0.97 else rng.choice(("SC2", "X"))
        frame = f.Frame(reader, seq, status, payload)
        if self.signing and rng.random() < 0.7:
            r = rng.random()
            boot = (self.boot if r < 0.8 else self.boot - 1 if r < 0.88 else self.boot + 1 if r < 0.96
                    else rng.choice((0, 2**32 - 1))) % f.SEQ_MOD
            frame = frame.sign(KEY if rng.random() < 0.9 else OTHER_KEY, boot)
        return frame

    def from_bytes(self, data: bytes) -> Any:
        return ("stream", data)

    def to_bytes(self, inp: Any) -> bytes:
        return self.f.encode_frame(inp) if isinstance(inp, self.f.Frame) else b""

    def _session(self, reader: str, auth: bool | None) -> Any:
        if auth is None:
            return self.f.ReaderSession(reader)
        return self.f.ReaderSession(reader, self.f.FrameAuthenticator([KEY], require=auth))

    def check(self, inp: Any) -> bool:
        if isinstance(inp, tuple) and inp[0] == "reset":
            self.session = self._session("SC1", inp[1])
            return True
        if isinstance(inp, tuple):  # coverage-guided: a fresh session fed the frames of one byte stream
            frames = [x for x in self.f.FrameDecoder().feed(inp[1]) if isinstance(x, self.f.Frame)]
            if not frames:
                return False
            self.session = self._session(frames[0].reader, (None, False, True)[len(inp[1]) % 3] if self.signing else None)
            ok = True
            for frame in frames:
                if frame.reader == self.session.reader:
                    ok = self._one(frame) and ok
            return ok
        return self._one(inp)

    def _one(self, frame: Any) -> bool:
        self.ns += 1_000_000
        foreign = frame.reader != self.session.reader
        s = self.session
        before = tuple(getattr(s, a, None) for a in _SESSION_STATE)
        forged_before = getattr(s, "forged", 0)
        try:
            out = s.accept(frame, self.ns)
        except ValueError as exc:
            need(foreign, f"accept() raised ValueError for its own reader: {exc}")
            raise
        need(not foreign, "accept() took a frame of another reader")
        bad = False
        kinds = self.kinds
        for inp in out:
            need(inp.reader == s.reader, f"input of reader {inp.reader!r}")
            need(inp.seq is None or 0 <= inp.seq < self.f.SEQ_MOD, f"input seq {inp.seq} out of range")
            if inp.kind == kinds.OK:
                need(inp.code == frame.payload, f"OK input with code {inp.code!r} for payload {frame.payload!r}")
            elif inp.kind in (kinds.CORRUPT, kinds.LOST):
                need(bool(inp.detail), f"{inp.kind} input without a detail", key=f"{inp.kind} without a detail")
                bad = bad or inp.kind == kinds.CORRUPT
            elif inp.kind == getattr(kinds, "FORGED", None):
                bad = True
                need(len(out) == 1, "a FORGED input came with other inputs")
                need(bool(inp.detail) and bool(getattr(inp, "reason", "x")), "a FORGED input without a reason",
                      key="FORGED without a reason")
                need(tuple(getattr(s, a, None) for a in _SESSION_STATE) == before,
                      "a forged frame changed the session", key="a forged frame changed the session")
                need(getattr(s, "forged", 1) == forged_before + 1, "a forged frame was not counted")
        if s.auth is not None if hasattr(s, "auth") else False:
            genuine = frame.mac is not None and frame.mac == frame.sign(KEY, frame.boot).mac
            if not genuine and (frame.mac is not None or s.auth.require):
                need(bool(out) and out[0].kind == kinds.FORGED, "a frame without a valid MAC was not FORGED",
                      key="invalid MAC accepted")
        need(min(s.lost, s.repeats, s.restarts, s.late, s.boots) >= 0, "a negative session counter")
        need(s.last_seq is None or 0 <= s.last_seq < self.f.SEQ_MOD, f"last_seq {s.last_seq} out of range",
              key="last_seq out of range")
        return not bad


class ScannerJsonTarget(JsonTarget):
    name = "scanner_json"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from drivers.frames import FrameError
        from drivers.scanner_json import ScannerMessage

        self.model, self.frame_error = ScannerMessage, FrameError

    def own_seeds(self) -> list[dict[str, Any]]:
        return self.corpus.scanner

    def parse(self, data: bytes) -> Any:
        return self.model.model_validate_json(data)

    def check(self, inp: bytes) -> bool:
        super().check(inp)
        try:
            self.parse(inp).frame()
        except self.frame_error as exc:  # schema-valid, but not a valid frame: refused the same way
            Target.rejection(self, exc)
            return False
        return True


class ScannerIngestTarget(ScannerJsonTarget):
    """``MqttScannerIngest.handle``: never raises; a bad message is reported once, with a reason."""

    name = "scanner_ingest"

    def setup(self, seed: int) -> None:
        super().setup(seed)
        from dealer.edge import topics
        from drivers.scanner_json import MqttScannerIngest

        self.topics = topics
        self.allowed = ()
        self.bad: list[tuple[str, str]] = []
        self.inputs: list[Any] = []
        self.links: list[Any] = []
        from drivers import frames

        self.frames = frames
        extra: dict[str, Any] = {}
        if hasattr(frames, "FrameAuthenticator"):  # SC2 signs its frames (HMAC); SC1 does not
            extra["auth"] = {"SC2": frames.FrameAuthenticator([KEY])}
        self.ingest = MqttScannerIngest({"SC1": "T1", "SC2": "T2"}, topic_table=topics.scanner_table, on_input=lambda t, i: self.inputs.append(i),
                                        on_link=lambda t, s: self.links.append(s),
                                        on_bad=lambda k, r: self.bad.append((k, r)), **extra)
        self.signing = "auth" in extra
        self.seq = {"SC1": 0, "SC2": 0}
        self.boot = {"SC1": 0, "SC2": 0}

    def generate(self, rng: random.Random) -> tuple[str, bytes]:
        r = rng.random()
        table = rng.choice(("T1", "T2"))
        topic = self.topics.scanner(table)
        if r < 0.05:
            topic = rng.choice(("", "studio/v1/tables/T3/scanner", self.topics.scanner("T1") + "/x", "#",
                                "studio/v1/tables//scanner", unicode_text(rng)))
        if r < 0.45:  # a live reader: sequence numbers move on, so the sessions see real traffic
            reader = "SC1" if table == "T1" else "SC2"
            if rng.random() < 0.03:
                reader = rng.choice(("SC1", "SC2", "SC9"))
            self.seq[reader] = self.seq.get(reader, 0) + rng.choice((1, 1, 1, 1, 0, 2, 5))
            status = rng.choices(("OK", "HB", "NOREAD", "BOOT"), weights=(60, 30, 5, 2))[0]
            if status == "BOOT":
                self.boot[reader] = self.boot.get(reader, 0) + 1
            doc = {"reader": reader, "seq": 0 if status == "BOOT" else self.seq[reader] % 2**32, "status": status,
                   "payload": rng.choice(("AS", "KD", "01G")) if status == "OK" else ""}
            if self.signing and rng.random() < 0.6:
                frame = self.frames.Frame(doc["reader"], doc["seq"], doc["status"], doc["payload"])
                boot = self.boot.get(reader, 0) + rng.choice((0, 0, 0, 0, 0, -1, 1))
                signed = frame.sign(KEY if rng.random() < 0.9 else OTHER_KEY, boot % 2**32)
                doc |= {"boot": signed.boot, "mac": signed.mac}
            if rng.random() < 0.3:
                doc = mutate_tree(doc, rng, self.corpus.keys, self.corpus.strings)
            return topic, encode_text(dump_json(doc))[:MAX_INPUT]
        return topic, super().generate(rng)

    def from_bytes(self, data: bytes) -> tuple[str, bytes]:
        return self.topics.scanner("T1" if len(data) % 2 else "T2"), data

    def to_bytes(self, inp: Any) -> bytes:
        return inp[1]

    def check(self, inp: tuple[str, bytes]) -> bool:
        topic, payload = inp
        del self.bad[:], self.inputs[:], self.links[:]
        self.ingest.handle(topic, payload)
        try:
            self.model.model_validate_json(payload).frame()
            valid = True
        except (*self.validation_error, self.frame_error):
            valid = False
        need(len(self.bad) <= 1, f"{len(self.bad)} bad-message reports for one message")
        if self.bad:
            kind, reason = self.bad[0]
            need(bool(kind) and bool(reason.strip()), "a bad-message report without a reason")
            need(not self.inputs and not self.links, "a refused message still produced scan inputs")
            return False
        need(valid, "an invalid scanner message was not reported as bad")
        forged = [i for i in self.inputs if i.kind == "FORGED"]
        if forged:
            need(len(self.inputs) == 1 and bool(forged[0].detail) and bool(getattr(forged[0], "reason", "x")),
                  "a FORGED scanner input without a reason, or with other inputs", key="FORGED input")
            need(not self.links, "a forged message counted as a sign of life", key="forged sign of life")
            return False
        return True
