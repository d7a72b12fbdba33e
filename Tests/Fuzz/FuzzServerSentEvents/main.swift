// libFuzzer target: the `text/event-stream` reader (the Server-Sent Events transport). The
// first byte picks the split and a small event size limit. Invariants: any split gives the same
// events, `retry` and error; the events are those of a plain reading of the whole stream by the
// standard's steps (below, written for clarity, not speed); no event over the limit.
import FuzzSupport
import TetherCore
import TetherHTTP

struct Outcome: Equatable {
    var events: [ServerSentEvent] = []
    var retry: Int?
    var failed = false
}

func run(_ pieces: [ArraySlice<UInt8>], limit: Int) -> Outcome {
    var reader = ServerSentEventReader(maximumEventSize: limit)
    var outcome = Outcome()
    defer { outcome.retry = reader.retry }
    for piece in pieces {
        reader.append(Array(piece))
        do {
            while let event = try reader.next() { outcome.events.append(event) }
        } catch {
            require(error.kind == .tooLarge, "an error other than too large: \(error)")
            outcome.failed = true
            outcome.retry = reader.retry
            return outcome
        }
    }
    outcome.retry = reader.retry
    return outcome
}

/// The standard's steps on the whole stream: split into lines at CR LF, LF or CR, then apply each.
func reference(_ stream: [UInt8]) -> Outcome {
    var bytes = stream[...]
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
    var lines: [ArraySlice<UInt8>] = []
    var lineStart = bytes.startIndex
    var index = bytes.startIndex
    while index < bytes.endIndex {
        let byte = bytes[index]
        if byte == 0x0A || byte == 0x0D {
            lines.append(bytes[lineStart..<index])
            if byte == 0x0D, index + 1 < bytes.endIndex, bytes[index + 1] == 0x0A { index += 1 }
            lineStart = index + 1
        }
        index += 1
    }
    var outcome = Outcome()
    var data: [UInt8] = []
    var type = ""
    var id = ""
    for line in lines {
        if line.isEmpty {
            if !data.isEmpty {
                data.removeLast()
                outcome.events.append(
                    ServerSentEvent(type: type.isEmpty ? "message" : type, data: data, lastEventId: id)
                )
            }
            data = []
            type = ""
            continue
        }
        if line.first == 0x3A { continue }
        let colon = line.firstIndex(of: 0x3A)
        let name = String(decoding: line[..<(colon ?? line.endIndex)], as: UTF8.self)
        var value = colon.map { line[($0 + 1)...] } ?? []
        if value.first == 0x20 { value = value.dropFirst() }
        switch name {
        case "data": data += value + [0x0A]
        case "event": type = String(decoding: value, as: UTF8.self)
        case "id": if !value.contains(0) { id = String(decoding: value, as: UTF8.self) }
        case "retry":
            if !value.isEmpty, value.count <= 18, value.allSatisfy({ (0x30...0x39).contains($0) }) {
                outcome.retry = Int(String(decoding: value, as: UTF8.self))
            }
        default: break
        }
    }
    return outcome
}

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let limit = 8 + Int(selector & 0x3F) * 4
    let stream = input.rest()
    let whole = run([stream[...]], limit: limit)
    let split = run(chunks(of: stream, seed: selector), limit: limit)
    require(whole == split, "a split of the stream read differently (seed \(selector))")
    for event in whole.events {
        require(event.data.count < limit, "an event over the limit")
    }
    if !whole.failed {
        let expected = reference(stream)
        require(whole.events == expected.events, "the events differ from the standard's steps")
        require(whole.retry == expected.retry, "retry differs from the standard's steps")
    } else {
        let expected = reference(stream)
        require(
            whole.events.elementsEqual(expected.events.prefix(whole.events.count)),
            "events before the failure differ"
        )
    }
    return 0
}
