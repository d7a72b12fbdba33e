import TetherCore
