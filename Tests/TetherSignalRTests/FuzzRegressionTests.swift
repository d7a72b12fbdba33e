import Testing
import TetherCore
import TetherSignalR

/// Inputs the fuzz targets (Tests/Fuzz) found, kept as tests.
struct FuzzRegressionTests {
    /// FuzzMessagePackHubProtocol: the error text of a value cut short inside a message gave the
    /// offset in the parser's buffer, so it changed with the messages received before it. It
    /// counts from the message's first byte now.
    @Test func messagePackErrorOffsetsCountFromTheMessage() throws {
        // An invocation whose one argument, a 5-byte string, has 2 bytes in its frame.
        let payload: [UInt8] = [0x95, 0x01, 0x80, 0xc0, 0xa1, 0x54, 0x91, 0xa5, 0x61, 0x62]
        let truncated = [UInt8(payload.count)] + payload
        let ping: [UInt8] = [0x02, 0x91, 0x06]
        func error(_ stream: [UInt8]) -> HubProtocolError? {
            var parser = MessagePackHubProtocol().makeParser()
            parser.append(stream)
            do {
                while try parser.next() != nil {}
                return nil
            } catch {
                return error
            }
        }
        let alone = try #require(error(truncated))
        #expect(alone.message == "Reading 'arguments' failed: MessagePack input ends inside a value (offset 7).")
        #expect(error(ping + ping + truncated) == alone)
    }
}
