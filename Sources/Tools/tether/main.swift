import Foundation

/// Lines to standard output, flushed at once (events must appear while the command runs).
let standardOutput: @Sendable (String) -> Void = { line in
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
let standardError: @Sendable (String) -> Void = { line in
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

exit(
    await runCommandLine(
        Array(CommandLine.arguments.dropFirst()),
        environment: ProcessInfo.processInfo.environment,
        output: standardOutput,
        errorOutput: standardError
    )
)
