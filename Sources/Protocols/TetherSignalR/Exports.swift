// What this module's API hands out comes with it: importing `TetherSignalR` is enough to use it
// (the machine kit, the JSON and MessagePack values arguments and results are made of).
@_exported public import TetherCore
@_exported public import TetherJSON
@_exported public import TetherMessagePack
