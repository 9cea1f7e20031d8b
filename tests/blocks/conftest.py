from __future__ import annotations

SEED_PROFILE = """# 基本信息
25岁，计算机专业研究生

## 教育背景
本科: 软件工程
研究生: 计算机科学

## 工作经验
3年后端开发

# 学习目标
深入理解分布式系统原理
"""
